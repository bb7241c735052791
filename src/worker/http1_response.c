/* placeholder: being written */
typedef int pagid_placeholder_http1_response;
