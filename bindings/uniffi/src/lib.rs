// The uniffi binding (issue 5).
