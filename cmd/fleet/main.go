package main

import (
	_ "github.com/spf13/cobra"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
)

func main() {}
