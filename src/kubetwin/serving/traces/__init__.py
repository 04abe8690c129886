"""Request traces: `arrays` (traces as columnar arrays, the public traces' loaders, the lazy Request iterator),
`generator` (RequestTrace `format: generator`'s synthetic traffic) and `requesttrace` (the RequestTrace kind turned
into the requests it sends)."""
