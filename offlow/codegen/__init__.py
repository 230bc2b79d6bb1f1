"""C code generation."""
