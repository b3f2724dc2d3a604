// Command fleet runs agent fleets and the consoles that attach to them.
// Everything lives in package cli; see `fleet --help`.
package main

import "github.com/agents-fleet/fleet/cli"

func main() { cli.Main() }
