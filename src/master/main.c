/* placeholder: being written */
typedef int pagid_placeholder_main;
