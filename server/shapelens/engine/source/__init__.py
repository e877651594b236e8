"""What the source alone tells: statements, loops and elementwise operators from the AST,
and the author's shape comments."""
