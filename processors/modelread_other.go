//go:build !unix

package processors

const openNonBlock = 0
