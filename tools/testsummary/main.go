// Command testsummary reads `go test -json` on stdin, prints what go test
// without -json would (the output of failed tests, each package's result),
// then every skipped test with its message, and a closing line
//
//	N passed, N failed, N skipped
//
// It exits 1 when a test or a package failed, when nothing was read, or
// when a test skipped that the -expected file does not allow: make test
// fails on a suite that passes by skipping. The allowlist's format is
// described on Allowlist.
//
//	go test -json ./... 2>&1 | go run ./tools/testsummary -expected tools/testsummary/expected-skips.txt
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	expected := flag.String("expected", "", "the allowlist of expected skips (none: every skip is unexpected)")
	verbose := flag.Bool("v", false, "echo every test's output as it comes, as go test -v does")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go test -json ... 2>&1 | testsummary [-expected file] [-v]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	var allow *Allowlist
	source := "the allowlist (none given)"
	if *expected != "" {
		f, err := os.Open(*expected)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
			os.Exit(2)
		}
		allow, err = ParseAllowlist(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsummary: %s: %v\n", *expected, err)
			os.Exit(2)
		}
		source = *expected
	}
	c := newCollector(os.Stdout, *verbose)
	if err := c.Read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: reading the test stream: %v\n", err)
		os.Exit(1)
	}
	if c.sum.Events == 0 {
		fmt.Println("testsummary: no test2json event read: pipe `go test -json` into it")
	}
	os.Exit(exitCode(&c.sum, c.sum.Report(os.Stdout, allow, source)))
}

// exitCode is 1 when the run failed, skipped unexpectedly, or was not a
// go test -json stream at all.
func exitCode(s *Summary, unexpected []Skip) int {
	if s.Events == 0 || s.Failed > 0 || len(s.FailedPackages) > 0 || len(unexpected) > 0 {
		return 1
	}
	return 0
}
