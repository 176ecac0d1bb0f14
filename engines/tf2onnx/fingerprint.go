package tf2onnx

import (
	"encoding/binary"
	"math/bits"
)

// Fingerprint64 is TensorFlow's tensorflow::Fingerprint64 (util::Fingerprint64,
// farmhash's Fingerprint64, which is farmhashna::Hash64): the hash
// StringToHashBucketFast and feature-column hash buckets use. It must be bit
// for bit TensorFlow's, or every hashed id of a served model changes.
func Fingerprint64(s []byte) uint64 {
	n := len(s)
	switch {
	case n <= 16:
		return fpLen0to16(s)
	case n <= 32:
		return fpLen17to32(s)
	case n <= 64:
		return fpLen33to64(s)
	}
	seed := uint64(81)
	x := seed
	y := seed*fpK1 + 113
	z := fpShiftMix(y*fpK2+113) * fpK2
	var v0, v1, w0, w1 uint64
	x = x*fpK2 + fetch64(s, 0)
	end := ((n - 1) / 64) * 64
	last64 := end + ((n - 1) & 63) - 63
	for p := 0; p != end; p += 64 {
		x = ror(x+y+v0+fetch64(s, p+8), 37) * fpK1
		y = ror(y+v1+fetch64(s, p+48), 42) * fpK1
		x ^= w1
		y += v0 + fetch64(s, p+40)
		z = ror(z+w0, 33) * fpK1
		v0, v1 = weakHashLen32WithSeeds(s, p, v1*fpK1, x+w0)
		w0, w1 = weakHashLen32WithSeeds(s, p+32, z+w1, y+fetch64(s, p+16))
		z, x = x, z
	}
	mul := fpK1 + ((z & 0xff) << 1)
	p := last64
	w0 += uint64((n - 1) & 63)
	v0 += w0
	w0 += v0
	x = ror(x+y+v0+fetch64(s, p+8), 37) * mul
	y = ror(y+v1+fetch64(s, p+48), 42) * mul
	x ^= w1 * 9
	y += v0*9 + fetch64(s, p+40)
	z = ror(z+w0, 33) * mul
	v0, v1 = weakHashLen32WithSeeds(s, p, v1*mul, x+w0)
	w0, w1 = weakHashLen32WithSeeds(s, p+32, z+w1, y+fetch64(s, p+16))
	z, x = x, z
	return fpHashLen16(fpHashLen16(v0, w0, mul)+fpShiftMix(y)*fpK0+z, fpHashLen16(v1, w1, mul)+x, mul)
}

const (
	fpK0 uint64 = 0xc3a5c85c97cb3127
	fpK1 uint64 = 0xb492b66fbe98f273
	fpK2 uint64 = 0x9ae16a3b2f90404f
)

func fetch64(s []byte, i int) uint64 { return binary.LittleEndian.Uint64(s[i:]) }
func fetch32(s []byte, i int) uint64 { return uint64(binary.LittleEndian.Uint32(s[i:])) }

// ror rotates right, as farmhash's Rotate does.
func ror(v uint64, k int) uint64 { return bits.RotateLeft64(v, -k) }

func fpShiftMix(v uint64) uint64 { return v ^ (v >> 47) }

func fpHashLen16(u, v, mul uint64) uint64 {
	a := (u ^ v) * mul
	a ^= a >> 47
	b := (v ^ a) * mul
	b ^= b >> 47
	return b * mul
}

func fpLen0to16(s []byte) uint64 {
	n := len(s)
	switch {
	case n >= 8:
		mul := fpK2 + uint64(n)*2
		a := fetch64(s, 0) + fpK2
		b := fetch64(s, n-8)
		c := ror(b, 37)*mul + a
		d := (ror(a, 25) + b) * mul
		return fpHashLen16(c, d, mul)
	case n >= 4:
		mul := fpK2 + uint64(n)*2
		a := fetch32(s, 0)
		return fpHashLen16(uint64(n)+(a<<3), fetch32(s, n-4), mul)
	case n > 0:
		a, b, c := uint32(s[0]), uint32(s[n>>1]), uint32(s[n-1])
		y := a + (b << 8)
		z := uint32(n) + (c << 2)
		return fpShiftMix(uint64(y)*fpK2^uint64(z)*fpK0) * fpK2
	}
	return fpK2
}

func fpLen17to32(s []byte) uint64 {
	n := len(s)
	mul := fpK2 + uint64(n)*2
	a := fetch64(s, 0) * fpK1
	b := fetch64(s, 8)
	c := fetch64(s, n-8) * mul
	d := fetch64(s, n-16) * fpK2
	return fpHashLen16(ror(a+b, 43)+ror(c, 30)+d, a+ror(b+fpK2, 18)+c, mul)
}

func fpLen33to64(s []byte) uint64 {
	n := len(s)
	mul := fpK2 + uint64(n)*2
	a := fetch64(s, 0) * fpK2
	b := fetch64(s, 8)
	c := fetch64(s, n-8) * mul
	d := fetch64(s, n-16) * fpK2
	y := ror(a+b, 43) + ror(c, 30) + d
	z := fpHashLen16(y, a+ror(b+fpK2, 18)+c, mul)
	e := fetch64(s, 16) * mul
	f := fetch64(s, 24)
	g := (y + fetch64(s, n-32)) * mul
	h := (z + fetch64(s, n-24)) * mul
	return fpHashLen16(ror(e+f, 43)+ror(g, 30)+h, e+ror(f+a, 18)+g, mul)
}

func weakHashLen32WithSeeds(s []byte, p int, a, b uint64) (uint64, uint64) {
	w, x, y, z := fetch64(s, p), fetch64(s, p+8), fetch64(s, p+16), fetch64(s, p+24)
	a += w
	b = ror(b+a+z, 21)
	c := a
	a += x
	a += y
	b += ror(a, 44)
	return a + z, b + c
}

// SipHash24 is SipHash-2-4 keyed by k (k[0] the low 64 key bits), the hash
// TensorFlow's StringToHashBucketStrong uses (strings::StrongKeyedHash).
func SipHash24(k [2]uint64, m []byte) uint64 {
	v0 := k[0] ^ 0x736f6d6570736575
	v1 := k[1] ^ 0x646f72616e646f6d
	v2 := k[0] ^ 0x6c7967656e657261
	v3 := k[1] ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(m)
	for len(m) >= 8 {
		w := binary.LittleEndian.Uint64(m)
		v3 ^= w
		round()
		round()
		v0 ^= w
		m = m[8:]
	}
	b := uint64(n) << 56
	for i, c := range m {
		b |= uint64(c) << (8 * i)
	}
	v3 ^= b
	round()
	round()
	v0 ^= b
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
