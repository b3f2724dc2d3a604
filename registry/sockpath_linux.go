package registry

// MaxSocketPath is the longest Unix socket path in bytes: len(sockaddr_un.sun_path)-1,
// keeping room for the terminating NUL.
const MaxSocketPath = 107
