// Command caffeweights writes random trained weights (.caffemodel) for a
// Caffe network definition, with the blob shapes its layers need, so a
// published deploy.prototxt can be served and benchmarked without its real
// weights (package engines/caffe/caffetest, Weights):
//
//	go run ./tools/caffeweights -o out.caffemodel [-seed N] [-legacy] deploy.prototxt
//
// -legacy writes the V1 format (NetParameter.layers) as old Caffe did.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/eas-server/eas-server/engines/caffe/caffetest"
)

func main() {
	out := flag.String("o", "", "output .caffemodel file (required)")
	seed := flag.Uint64("seed", 1, "random seed of the weights")
	legacy := flag.Bool("legacy", false, "write the V1 (NetParameter.layers) format")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: caffeweights -o out.caffemodel [-seed N] [-legacy] deploy.prototxt\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out, *seed, *legacy); err != nil {
		fmt.Fprintln(os.Stderr, "caffeweights:", err)
		os.Exit(1)
	}
}

func run(definition, out string, seed uint64, legacy bool) error {
	def, err := os.ReadFile(definition)
	if err != nil {
		return err
	}
	w, err := caffetest.Weights(def, seed, legacy)
	if err != nil {
		return fmt.Errorf("%s: %w", definition, err)
	}
	return os.WriteFile(out, w, 0o644)
}
