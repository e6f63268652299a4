//! One connection's record (the kernel's cm_id_private).
