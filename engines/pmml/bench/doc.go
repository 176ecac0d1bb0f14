// Package bench compares the pmml evaluator with goscore, the only other Go
// PMML library on the module proxy, on models both can score: a random
// forest and a logistic regression. It is its own module so that goscore
// never becomes a dependency of eas-server; goscore serves only as a peer
// here (see docs/dependencies.md for why it is not used otherwise).
package bench
