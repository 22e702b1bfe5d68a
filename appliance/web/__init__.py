"""The HTTP surface: the API, provider callbacks, operations endpoints and pages."""
