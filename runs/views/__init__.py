"""Console views, one module per page: parse the request, call one selector or service, render."""
