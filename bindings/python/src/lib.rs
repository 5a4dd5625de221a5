// The pyo3 binding (issue 3).
