module github.com/eas-server/eas-server/engines/pmml/bench

go 1.26.0

require (
	github.com/asafschers/goscore v0.0.0-20190823112107-6e6e174c153a
	github.com/eas-server/eas-server v0.0.0
)

require (
	github.com/mattn/go-shellwords v1.0.16 // indirect
	github.com/onsi/ginkgo v1.16.5 // indirect
	github.com/onsi/gomega v1.44.0 // indirect
)

replace github.com/eas-server/eas-server => ../../..
