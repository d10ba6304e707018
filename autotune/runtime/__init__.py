"""The run-time side: choosing a stored configuration for a call, compiling and loading it, launching it."""
