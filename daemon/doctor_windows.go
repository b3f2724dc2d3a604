//go:build windows

package daemon

// privateFix says how to make dir private to the user again: the fleet
// never rewrites an access list, but makes the folder afresh.
func privateFix(dir string) string { return "remove it; the fleet makes it again, yours alone" }
