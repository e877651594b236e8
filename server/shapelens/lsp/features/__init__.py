"""LSP features as pure functions: a file's view (its results placed on the document) and
the document in, LSP objects out. They never import the server; ``lsp.handlers`` and
``lsp.publish`` call them with what the server holds."""
