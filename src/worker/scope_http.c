/* placeholder: being written */
typedef int pagid_placeholder_scope_http;
