// Package bench compares package trees with github.com/dmitryikh/leaves
// on the same model and inputs. It is its own module so that leaves, a
// benchmark peer only, stays out of the server's go.mod.
package bench
