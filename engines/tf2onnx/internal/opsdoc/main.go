// Command opsdoc writes the list of TensorFlow ops that tf2onnx translates
// (tf2onnx.OpsMarkdown, from the op table) into the generated section of a
// README, between the markers of package readme. The rest of the file is
// kept as it is.
//
//	go generate ./engines/tf2onnx
//	go run ./engines/tf2onnx/internal/opsdoc -readme processors/tensorflow/README.md [-check]
//
// With -check nothing is written; the exit status is 1 when the section is
// out of date.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/engines/tf2onnx/internal/readme"
)

func main() {
	path := flag.String("readme", "", "the README to update")
	check := flag.Bool("check", false, "only report whether the section is up to date")
	flag.Parse()
	if *path == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: opsdoc -readme FILE [-check]")
		os.Exit(2)
	}
	doc, err := os.ReadFile(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "opsdoc:", err)
		os.Exit(1)
	}
	out, err := readme.Splice(doc, tf2onnx.OpsMarkdown())
	if err != nil {
		fmt.Fprintf(os.Stderr, "opsdoc: %s: %v\n", *path, err)
		os.Exit(1)
	}
	if bytes.Equal(out, doc) {
		return
	}
	if *check {
		fmt.Fprintf(os.Stderr, "opsdoc: the ops section of %s is out of date; run go generate ./engines/tf2onnx\n", *path)
		os.Exit(1)
	}
	fi, err := os.Stat(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "opsdoc:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*path, out, fi.Mode().Perm()); err != nil {
		fmt.Fprintln(os.Stderr, "opsdoc:", err)
		os.Exit(1)
	}
}
