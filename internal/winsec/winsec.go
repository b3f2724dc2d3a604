// Package winsec holds the Windows security the fleet's private objects
// share: the user-only security descriptor that the control pipe, the fleet
// home, its control folder and token files are created with; reading one
// back and checking it; and opening a named pipe's client end for a probe.
// Its code is Windows-only.
package winsec
