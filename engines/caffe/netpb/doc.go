// Package netpb is the generated Go code for caffe.proto beside it: the part
// of Caffe's NetParameter (network definitions and trained weights) that
// package caffe reads. Regenerate after editing caffe.proto with `make proto`.
package netpb
