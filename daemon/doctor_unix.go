//go:build !windows

package daemon

// privateFix says how to make dir private to the user again.
func privateFix(dir string) string { return "chmod 700 " + dir }
