// The broker's wire side (ARCHITECTURE.md, "A broker request"): HTTP/1.1 over a UNIX stream socket.
// The server half (listening, the peer check, request parsing, the audit line) answers through a
// handler the CLI gives it, so every answer still goes through the one owner; the client half
// (client mode) asks a broker and never touches a store. Neither half prints: they return values.
