// The napi-rs binding (issue 4).
