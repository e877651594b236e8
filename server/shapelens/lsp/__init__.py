"""The language server (``shapelens lsp``): runs user code through the runner on request and
serves the results over plain LSP (inlay hints, hover, diagnostics, code lens) plus one
custom notification, ``shapelens/traceUpdated``, for the VS Code extension's decorations."""
