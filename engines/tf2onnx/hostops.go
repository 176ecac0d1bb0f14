package tf2onnx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/tensor"
)

// The string ops of the host stage (host.go): each translator checks the
// node's attributes and constant inputs at translation time and adds a
// step whose kernel computes what TensorFlow's computes, on the request's
// tensors.

// hostUnary adds a step applying f to n's first input, which must be of
// dtype in (Invalid: any numeric dtype); the result has dtype out and the
// input's shape.
func (c *converter) hostUnary(n *node, in, out tensor.DType, f func(tensor.Tensor) (tensor.Tensor, error)) {
	a, ok := c.hostArg(n, 0)
	if !ok {
		return
	}
	o := c.hostOutOf(a)
	if in != tensor.Invalid && o.dtype != in || in == tensor.Invalid && (o.dtype == tensor.String || o.dtype == tensor.Invalid) {
		c.unsupported(n, fmt.Sprintf("input of dtype %s", o.dtype))
		return
	}
	c.hostStep(n, []HostRef{a}, []hostOut{{dtype: out, rank: o.rank, batch: o.batch}}, func(args []tensor.Tensor) ([]tensor.Tensor, error) {
		r, err := f(args[0])
		return []tensor.Tensor{r}, err
	})
}

// mapStrings applies f to each string of t.
func mapStrings(t tensor.Tensor, f func(int, []byte) ([]byte, error)) (tensor.Tensor, error) {
	out := tensor.Tensor{DType: tensor.String, Shape: slices.Clone(t.Shape), Strings: make([][]byte, len(t.Strings))}
	for i, s := range t.Strings {
		r, err := f(i, s)
		if err != nil {
			return out, err
		}
		out.Strings[i] = r
	}
	return out, nil
}

// mapInt64 applies f to each string of t, giving int64s.
func mapInt64(t tensor.Tensor, f func([]byte) int64) tensor.Tensor {
	v := make([]int64, len(t.Strings))
	for i, s := range t.Strings {
		v[i] = f(s)
	}
	return tensor.FromInt64("", t.Shape, v)
}

// stringToHashBucket translates StringToHashBucketFast (FarmHash
// Fingerprint64), StringToHashBucketStrong (SipHash-2-4 with the key
// attribute) and the legacy StringToHashBucket (TensorFlow's Hash64, a
// MurmurHash64A variant): bucket = hash mod num_buckets.
func (c *converter) stringToHashBucket(n *node) {
	buckets := n.i("num_buckets", 0)
	if buckets < 1 {
		c.unsupported(n, "num_buckets must be at least 1")
		return
	}
	nb := uint64(buckets)
	var hash func([]byte) uint64
	switch n.op {
	case "StringToHashBucketFast":
		hash = Fingerprint64
	case "StringToHashBucket":
		hash = Hash64
	case "StringToHashBucketStrong":
		k := n.ilist("key", nil)
		if len(k) != 2 {
			c.unsupported(n, "the key attribute must hold two integers")
			return
		}
		key := [2]uint64{uint64(k[0]), uint64(k[1])}
		hash = func(s []byte) uint64 { return SipHash24(key, s) }
	}
	c.hostUnary(n, tensor.String, tensor.Int64, func(t tensor.Tensor) (tensor.Tensor, error) {
		return mapInt64(t, func(s []byte) int64 { return int64(hash(s) % nb) }), nil
	})
}

// Hash64 is TensorFlow's tensorflow::Hash64 (core/lib/hash/hash.cc, seed
// 0xDECAFCAFFE), a MurmurHash64A variant: the hash of the legacy
// StringToHashBucket op.
func Hash64(s []byte) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := uint64(0xDECAFCAFFE) ^ uint64(len(s))*m
	for len(s) >= 8 {
		k := binary.LittleEndian.Uint64(s)
		s = s[8:]
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
	}
	if len(s) > 0 {
		for i := len(s) - 1; i >= 0; i-- {
			h ^= uint64(s[i]) << (8 * i)
		}
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// stringJoin translates StringJoin: element-wise concatenation with a
// separator; scalar inputs are repeated, the others must share one shape.
func (c *converter) stringJoin(n *node) {
	sep := []byte(n.s("separator", ""))
	var args []HostRef
	out := hostOut{dtype: tensor.String}
	var batchRank int
	for i := range n.inputs {
		a, ok := c.hostArg(n, i)
		if !ok {
			return
		}
		o := c.hostOutOf(a)
		if o.dtype != tensor.String {
			c.unsupported(n, fmt.Sprintf("input %d has dtype %s", i, o.dtype))
			return
		}
		args = append(args, a)
		switch {
		case o.rank < 0 || out.rank < 0:
			out.rank = -1
		case o.rank > out.rank:
			out.rank = o.rank
		}
		if o.batch {
			out.batch, batchRank = true, o.rank
		}
	}
	for _, a := range args {
		// Batched requests concatenate along dimension 0: every other
		// input must be a scalar for that to keep its meaning.
		if o := c.hostOutOf(a); !o.batch && o.rank != 0 || o.batch && o.rank != batchRank {
			out.batch = false
		}
	}
	if len(args) == 0 {
		c.unsupported(n, "no inputs")
		return
	}
	c.hostStep(n, args, []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
		var shape []int64
		var count int64 = 1
		found := false
		for _, t := range in {
			if len(t.Shape) == 0 {
				continue
			}
			if !found {
				shape, count, found = t.Shape, t.NumElements(), true
			} else if !slices.Equal(shape, t.Shape) {
				return nil, fmt.Errorf("input shapes do not match: %s vs. %s", tensor.FormatShape(shape), tensor.FormatShape(t.Shape))
			}
		}
		res := tensor.Tensor{DType: tensor.String, Shape: slices.Clone(shape), Strings: make([][]byte, count)}
		if !found {
			res.Shape = []int64{}
		}
		var b []byte
		for i := range res.Strings {
			b = b[:0]
			for j, t := range in {
				if j > 0 {
					b = append(b, sep...)
				}
				if len(t.Shape) == 0 {
					b = append(b, t.Strings[0]...)
				} else {
					b = append(b, t.Strings[i]...)
				}
			}
			res.Strings[i] = bytes.Clone(b)
		}
		return []tensor.Tensor{res}, nil
	})
}

// stringToNumber translates StringToNumber: each string parsed as
// TensorFlow's SafeStringToNumeric does; a string that is not a number is
// the request's error, as TensorFlow's kernel fails.
func (c *converter) stringToNumber(n *node) {
	dt := n.dtype("out_type", tensor.Float32)
	var parse func([]byte) ([]byte, bool)
	switch dt {
	case tensor.Float32:
		parse = func(s []byte) ([]byte, bool) {
			f, ok := parseTFFloat(s, 32)
			b := math.Float32bits(float32(f))
			if math.IsNaN(f) {
				b = 0x7FC00000 | uint32(math.Float64bits(f)>>63)<<31
			}
			return binary.LittleEndian.AppendUint32(nil, b), ok
		}
	case tensor.Float64:
		parse = func(s []byte) ([]byte, bool) {
			f, ok := parseTFFloat(s, 64)
			return binary.LittleEndian.AppendUint64(nil, math.Float64bits(f)), ok
		}
	case tensor.Int32:
		parse = func(s []byte) ([]byte, bool) {
			v, ok := parseTFInt(s, 32)
			return binary.LittleEndian.AppendUint32(nil, uint32(int32(v))), ok
		}
	case tensor.Int64:
		parse = func(s []byte) ([]byte, bool) {
			v, ok := parseTFInt(s, 64)
			return binary.LittleEndian.AppendUint64(nil, uint64(v)), ok
		}
	default:
		c.unsupported(n, fmt.Sprintf("out_type %s is not supported", dt))
		return
	}
	c.hostUnary(n, tensor.String, dt, func(t tensor.Tensor) (tensor.Tensor, error) {
		res := tensor.Tensor{DType: dt, Shape: slices.Clone(t.Shape), Data: make([]byte, 0, len(t.Strings)*dt.Size())}
		for _, s := range t.Strings {
			b, ok := parse(s)
			if !ok {
				return res, fmt.Errorf("StringToNumberOp could not correctly convert string: %q", s)
			}
			res.Data = append(res.Data, b...)
		}
		return res, nil
	})
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r'
}

// parseTFInt is TensorFlow's safe_strto32 / safe_strto64: optional ASCII
// spaces, an optional sign, decimal digits, optional spaces; no overflow.
func parseTFInt(s []byte, bitSize int) (int64, bool) {
	t := trimSpace(s)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg, t = t[0] == '-', t[1:]
	}
	if t == "" {
		return 0, false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return 0, false
		}
	}
	if neg {
		t = "-" + t
	}
	v, err := strconv.ParseInt(t, 10, bitSize)
	return v, err == nil
}

func trimSpace(s []byte) string {
	return strings.TrimFunc(string(s), func(r rune) bool { return r < 128 && isSpace(byte(r)) })
}

// parseTFFloat is TensorFlow's safe_strtof / safe_strtod as TensorFlow
// 2.21 parses: ASCII spaces around, an optional sign, then a decimal
// number, a hexadecimal integer (0x...), or inf, infinity and nan in any
// case; overflow gives an infinity, underflow zero.
func parseTFFloat(s []byte, bitSize int) (float64, bool) {
	body := trimSpace(s)
	neg := false
	if body != "" && (body[0] == '+' || body[0] == '-') {
		neg = body[0] == '-'
		body = body[1:]
	}
	var v float64
	switch lower := strings.ToLower(body); {
	case lower == "inf" || lower == "infinity":
		v = math.Inf(1)
	case lower == "nan":
		// TensorFlow's quiet NaN, sign included.
		v = math.Float64frombits(0x7FF8000000000000)
	case len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X'):
		hex := body[2:]
		for i := 0; i < len(hex); i++ {
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(hex[i])) {
				return 0, false
			}
		}
		var err error
		if v, err = strconv.ParseFloat("0x"+hex+"p0", bitSize); err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
	default:
		if !decimalNumber(body) {
			return 0, false
		}
		var err error
		if v, err = strconv.ParseFloat(body, bitSize); err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
	}
	if neg {
		v = math.Copysign(v, -1)
	}
	return v, true
}

// decimalNumber reports whether s is digits [. digits] [e [sign] digits]
// with at least one mantissa digit.
func decimalNumber(s string) bool {
	i, mant := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, mant = i+1, mant+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, mant = i+1, mant+1
		}
	}
	if mant == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

// asString translates AsString of integers, bools and floats (printf
// formats as TensorFlow builds them from precision, scientific, shortest,
// width and fill).
func (c *converter) asString(n *node) {
	a, ok := c.hostArg(n, 0)
	if !ok {
		return
	}
	dt := c.hostOutOf(a).dtype
	prec, width := n.i("precision", -1), n.i("width", -1)
	sci, short := n.b("scientific", false), n.b("shortest", false)
	fill := n.s("fill", "")
	if len(fill) > 1 || fill != "" && fill != " " && fill != "0" {
		c.unsupported(n, "fill must be empty, a space or 0")
		return
	}
	if sci && short {
		c.unsupported(n, "scientific and shortest together")
		return
	}
	spec := "%" + fill
	if width > -1 {
		spec += strconv.FormatInt(width, 10)
	}
	var format func(t tensor.Tensor, i int) string
	switch dt {
	case tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64, tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64:
		if prec > -1 || sci || short {
			c.unsupported(n, "precision, scientific and shortest apply to floats")
			return
		}
		spec += "d"
		format = func(t tensor.Tensor, i int) string { return fmt.Sprintf(spec, intAt(t, i)) }
	case tensor.Bool:
		format = func(t tensor.Tensor, i int) string { return strconv.FormatBool(t.Data[i] != 0) }
	case tensor.Float32, tensor.Float64:
		switch {
		case prec > -1:
			spec += "." + strconv.FormatInt(prec, 10)
		case short:
			spec += ".6" // C's %g default precision; Go's %g is the shortest repr
		}
		switch {
		case sci:
			spec += "e"
		case short:
			spec += "g"
		default:
			spec += "f"
		}
		format = func(t tensor.Tensor, i int) string {
			var f float64
			if t.DType == tensor.Float32 {
				f = float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:])))
			} else {
				f = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
			}
			if math.IsNaN(f) || math.IsInf(f, 0) {
				s := "nan"
				switch {
				case math.IsInf(f, 1):
					s = "inf"
				case math.IsInf(f, -1):
					s = "-inf"
				case math.Signbit(f):
					s = "-nan"
				}
				w := "%" + strconv.FormatInt(max(width, 0), 10) + "s"
				return fmt.Sprintf(w, s)
			}
			return fmt.Sprintf(spec, f)
		}
	default:
		c.unsupported(n, fmt.Sprintf("input of dtype %s", dt))
		return
	}
	o := c.hostOutOf(a)
	c.hostStep(n, []HostRef{a}, []hostOut{{dtype: tensor.String, rank: o.rank, batch: o.batch}}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
		t := in[0]
		k := int(t.NumElements())
		res := tensor.Tensor{DType: tensor.String, Shape: slices.Clone(t.Shape), Strings: make([][]byte, k)}
		for i := range k {
			res.Strings[i] = []byte(format(t, i))
		}
		return []tensor.Tensor{res}, nil
	})
}

// intAt reads integer element i of t.
func intAt(t tensor.Tensor, i int) any {
	switch t.DType {
	case tensor.Int8:
		return int8(t.Data[i])
	case tensor.Uint8:
		return t.Data[i]
	case tensor.Int16:
		return int16(binary.LittleEndian.Uint16(t.Data[2*i:]))
	case tensor.Uint16:
		return binary.LittleEndian.Uint16(t.Data[2*i:])
	case tensor.Int32:
		return int32(binary.LittleEndian.Uint32(t.Data[4*i:]))
	case tensor.Uint32:
		return binary.LittleEndian.Uint32(t.Data[4*i:])
	case tensor.Uint64:
		return binary.LittleEndian.Uint64(t.Data[8*i:])
	}
	return int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
}

// regexReplace translates StaticRegexReplace and RegexReplace (with
// constant pattern and rewrite). TensorFlow matches with RE2, whose syntax
// Go's regexp implements; the rewrite's \0..\9 name groups and \\ is a
// backslash. replace_global replaces every non-overlapping match (an empty
// match right after a match is skipped, in both), else the first.
func (c *converter) regexReplace(n *node) {
	pattern, rewrite := n.s("pattern", ""), n.s("rewrite", "")
	if n.op == "RegexReplace" {
		p, r := c.in(n, 1).konst, c.in(n, 2).konst
		if p == nil || r == nil || len(p.Strings) != 1 || len(r.Strings) != 1 {
			c.unsupported(n, "pattern and rewrite must be constant scalars")
			return
		}
		pattern, rewrite = string(p.Strings[0]), string(r.Strings[0])
	}
	global := n.b("replace_global", true)
	re, err := regexp.Compile(pattern)
	if err != nil {
		c.unsupported(n, fmt.Sprintf("pattern %q: %v", pattern, err))
		return
	}
	pieces, err := parseRewrite(rewrite, re.NumSubexp())
	if err != nil {
		c.unsupported(n, err.Error())
		return
	}
	c.hostUnary(n, tensor.String, tensor.String, func(t tensor.Tensor) (tensor.Tensor, error) {
		return mapStrings(t, func(_ int, s []byte) ([]byte, error) {
			limit := -1
			if !global {
				limit = 1
			}
			ms := re.FindAllSubmatchIndex(s, limit)
			if len(ms) == 0 {
				return s, nil
			}
			var b []byte
			last := 0
			for _, m := range ms {
				b = append(b, s[last:m[0]]...)
				for _, p := range pieces {
					if p.group < 0 {
						b = append(b, p.lit...)
					} else if g := m[2*p.group:]; g[0] >= 0 {
						b = append(b, s[g[0]:g[1]]...)
					}
				}
				last = m[1]
			}
			return append(b, s[last:]...), nil
		})
	})
}

type rewritePiece struct {
	lit   string
	group int // -1 for a literal
}

// parseRewrite splits an RE2 rewrite string into literals and group
// references, refusing what RE2 refuses.
func parseRewrite(r string, groups int) ([]rewritePiece, error) {
	var out []rewritePiece
	var lit strings.Builder
	for i := 0; i < len(r); i++ {
		if r[i] != '\\' {
			lit.WriteByte(r[i])
			continue
		}
		i++
		switch {
		case i < len(r) && r[i] == '\\':
			lit.WriteByte('\\')
		case i < len(r) && r[i] >= '0' && r[i] <= '9':
			g := int(r[i] - '0')
			if g > groups {
				return nil, fmt.Errorf("rewrite %q names group %d; the pattern has %d", r, g, groups)
			}
			out = append(out, rewritePiece{lit: lit.String(), group: -1}, rewritePiece{group: g})
			lit.Reset()
		default:
			return nil, fmt.Errorf("rewrite %q: a backslash must be followed by a digit or a backslash", r)
		}
	}
	return append(out, rewritePiece{lit: lit.String(), group: -1}), nil
}

// substr translates Substr with constant pos and len (scalars, or of the
// input's shape): BYTE or UTF8_CHAR units, negative pos counting from the
// end, len clipped at the end (a negative len: to the end in bytes,
// nothing in characters, as TensorFlow's kernel); pos outside the string
// is the request's error, as in TensorFlow.
func (c *converter) substr(n *node) {
	unit := n.s("unit", "BYTE")
	if unit != "BYTE" && unit != "UTF8_CHAR" {
		c.unsupported(n, fmt.Sprintf("unit %q", unit))
		return
	}
	pt, lt := c.in(n, 1).konst, c.in(n, 2).konst
	pos, ok1 := ints(pt)
	ln, ok2 := ints(lt)
	if !ok1 || !ok2 || !slices.Equal(pt.Shape, lt.Shape) {
		c.unsupported(n, "pos and len must be constants of one shape")
		return
	}
	scalar := len(pt.Shape) == 0
	c.hostUnary(n, tensor.String, tensor.String, func(t tensor.Tensor) (tensor.Tensor, error) {
		if !scalar && !slices.Equal(t.Shape, pt.Shape) {
			return t, fmt.Errorf("pos and len have shape %s and the input %s; only scalars or the input's shape are served", tensor.FormatShape(pt.Shape), tensor.FormatShape(t.Shape))
		}
		return mapStrings(t, func(i int, s []byte) ([]byte, error) {
			p, l := pos[0], ln[0]
			if !scalar {
				p, l = pos[i], ln[i]
			}
			var bounds []int // where each unit starts, then len(s)
			if unit == "BYTE" {
				if p < -int64(len(s)) || p > int64(len(s)) {
					return nil, fmt.Errorf("pos %d out of range for string b'%s' at index %d", p, s, i)
				}
				if p < 0 {
					p += int64(len(s))
				}
				end := int64(len(s))
				if l >= 0 && p+l < end {
					end = p + l
				}
				return s[p:end], nil
			}
			for j := range s {
				if j == 0 || s[j]&0xC0 != 0x80 {
					bounds = append(bounds, j)
				}
			}
			chars := int64(len(bounds))
			bounds = append(bounds, len(s))
			if p < -chars || p > chars {
				return nil, fmt.Errorf("pos %d out of range for string b'%s' at index %d", p, s, i)
			}
			if p < 0 {
				p += chars
			}
			e := chars
			switch {
			case l < 0:
				e = p // counted in characters, a negative len takes nothing
			case p+l < e:
				e = p + l
			}
			return s[bounds[p]:bounds[e]], nil
		})
	})
}

// stringCase translates StringLower and StringUpper with the default
// encoding (ASCII letters only, as absl::AsciiStrToLower); "utf-8" is
// refused (TensorFlow uses ICU's case mapping).
func (c *converter) stringCase(n *node) {
	if e := n.s("encoding", ""); e != "" {
		c.unsupported(n, fmt.Sprintf("encoding %q (ICU case mapping) is not translated; the default ASCII one is", e))
		return
	}
	upper := n.op == "StringUpper"
	c.hostUnary(n, tensor.String, tensor.String, func(t tensor.Tensor) (tensor.Tensor, error) {
		return mapStrings(t, func(_ int, s []byte) ([]byte, error) {
			b := bytes.Clone(s)
			for i, ch := range b {
				switch {
				case upper && ch >= 'a' && ch <= 'z':
					b[i] = ch - 32
				case !upper && ch >= 'A' && ch <= 'Z':
					b[i] = ch + 32
				}
			}
			return b, nil
		})
	})
}

// reduceJoin translates ReduceJoin over constant axes: the strings along
// the reduced axes joined with the separator, the last axis listed first
// varying fastest (TensorFlow's kernel order).
func (c *converter) reduceJoin(n *node) {
	a, ok := c.hostArg(n, 0)
	if !ok {
		return
	}
	o := c.hostOutOf(a)
	axes, ok := ints(c.in(n, 1).konst)
	if !ok || o.dtype != tensor.String {
		c.unsupported(n, "reduction_indices must be constant, the input a string")
		return
	}
	keep := n.b("keep_dims", false)
	sep := []byte(n.s("separator", ""))
	out := hostOut{dtype: tensor.String, rank: -1}
	if o.rank >= 0 {
		out.rank = o.rank
		if !keep {
			out.rank -= len(axes)
		}
		out.batch = o.batch && !slices.ContainsFunc(axes, func(x int64) bool { return x == 0 || x == -int64(o.rank) })
	}
	c.hostStep(n, []HostRef{a}, []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
		t := in[0]
		rank := int64(len(t.Shape))
		red := make([]int, len(axes))
		isRed := make([]bool, rank)
		for i, x := range axes {
			if x < -rank || x >= rank {
				return nil, fmt.Errorf("invalid reduction dimension %d for input of rank %d", x, rank)
			}
			if x < 0 {
				x += rank
			}
			if isRed[x] {
				return nil, fmt.Errorf("duplicate reduction dimension %d", x)
			}
			isRed[x] = true
			red[len(axes)-1-i] = int(x)
		}
		var kept []int
		var shape []int64
		for d := range int(rank) {
			switch {
			case !isRed[d]:
				kept = append(kept, d)
				shape = append(shape, t.Shape[d])
			case keep:
				shape = append(shape, 1)
			}
		}
		strides := make([]int64, rank)
		s := int64(1)
		for d := int(rank) - 1; d >= 0; d-- {
			strides[d] = s
			s *= t.Shape[d]
		}
		sub := func(idx int64, dims []int) int64 {
			var r int64
			for i := len(dims) - 1; i >= 0; i-- {
				d := dims[i]
				r += strides[d] * (idx % t.Shape[d])
				idx /= t.Shape[d]
			}
			return r
		}
		count := func(dims []int) int64 {
			k := int64(1)
			for _, d := range dims {
				k *= t.Shape[d]
			}
			return k
		}
		outN, redN := count(kept), count(red)
		res := tensor.Tensor{DType: tensor.String, Shape: shape, Strings: make([][]byte, outN)}
		if res.Shape == nil {
			res.Shape = []int64{}
		}
		for i := range outN {
			base := sub(i, kept)
			var b []byte
			for j := range redN {
				if j > 0 {
					b = append(b, sep...)
				}
				b = append(b, t.Strings[base+sub(j, red)]...)
			}
			if b == nil {
				b = []byte{}
			}
			res.Strings[i] = b
		}
		return []tensor.Tensor{res}, nil
	})
}

// stringSplit translates StringSplit and StringSplitV2 of a string vector
// into a sparse tensor (indices [n, 2], values [n], dense_shape [2]).
// StringSplit splits at any byte of a non-empty delimiter (into bytes when
// it is empty), skipping empty tokens when skip_empty; StringSplitV2
// splits as Python's bytes.split(sep, maxsplit).
func (c *converter) stringSplit(n *node) {
	a, ok := c.hostArg(n, 0)
	if !ok {
		return
	}
	d := c.in(n, 1).konst
	if d == nil || d.DType != tensor.String || len(d.Strings) != 1 {
		c.unsupported(n, "the delimiter must be a constant string")
		return
	}
	if o := c.hostOutOf(a); o.dtype != tensor.String || o.rank > 1 {
		c.unsupported(n, "the input must be a string vector")
		return
	}
	sep := d.Strings[0]
	var split func([]byte) [][]byte
	if n.op == "StringSplit" {
		skip := n.b("skip_empty", true)
		split = func(s []byte) [][]byte {
			var toks [][]byte
			if len(sep) == 0 {
				for i := range s {
					toks = append(toks, s[i:i+1])
				}
				return toks
			}
			if len(s) == 0 {
				return nil
			}
			start := 0
			for i := 0; i <= len(s); i++ {
				if i == len(s) || bytes.IndexByte(sep, s[i]) >= 0 {
					if !skip || i > start {
						toks = append(toks, s[start:i])
					}
					start = i + 1
				}
			}
			return toks
		}
	} else {
		maxsplit := n.i("maxsplit", -1)
		split = func(s []byte) [][]byte { return splitV2(s, sep, maxsplit) }
	}
	outs := []hostOut{{dtype: tensor.Int64, rank: 2}, {dtype: tensor.String, rank: 1}, {dtype: tensor.Int64, rank: 1}}
	c.hostStep(n, []HostRef{a}, outs, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
		t := in[0]
		if len(t.Shape) != 1 {
			return nil, fmt.Errorf("input must be a vector, got shape %s", tensor.FormatShape(t.Shape))
		}
		var idx []int64
		var vals [][]byte
		width := int64(0)
		for i, s := range t.Strings {
			toks := split(s)
			for j, tok := range toks {
				idx = append(idx, int64(i), int64(j))
				vals = append(vals, tok)
			}
			width = max(width, int64(len(toks)))
		}
		k := int64(len(vals))
		return []tensor.Tensor{
			tensor.FromInt64("", []int64{k, 2}, idx),
			{DType: tensor.String, Shape: []int64{k}, Strings: vals},
			tensor.FromInt64("", []int64{2}, []int64{int64(len(t.Strings)), width}),
		}, nil
	})
}

// splitV2 is StringSplitV2's split (Python's bytes.split, but for
// whitespace with maxsplit: once maxsplit tokens are taken, the rest after
// the whitespace is one more token, empty or not).
func splitV2(s, sep []byte, maxsplit int64) [][]byte {
	if maxsplit == 0 {
		return [][]byte{s}
	}
	var out [][]byte
	if len(sep) > 0 {
		for {
			i := bytes.Index(s, sep)
			if i < 0 {
				return append(out, s)
			}
			out = append(out, s[:i])
			s = s[i+len(sep):]
			if maxsplit > 0 && int64(len(out)) == maxsplit {
				return append(out, s)
			}
		}
	}
	trim := func(s []byte) []byte {
		for len(s) > 0 && isSpace(s[0]) {
			s = s[1:]
		}
		return s
	}
	s = trim(s)
	for len(s) > 0 {
		i := 0
		for i < len(s) && !isSpace(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = trim(s[i:])
		if maxsplit > 0 && int64(len(out)) == maxsplit {
			return append(out, s)
		}
	}
	return out
}

// Why the string ops outside the host stage are refused.
func init() {
	const host = "a string op the host stage does not run in Go (it runs hashing, StringJoin, StringSplit, " +
		"StringToNumber, AsString, regex replace, Substr, ASCII case and ReduceJoin); serve the model with runtime libtensorflow or auto"
	for _, op := range []string{"StringLength", "StringFormat", "StringNGrams", "StringStrip", "UnicodeDecode",
		"UnicodeDecodeWithOffsets", "UnicodeEncode", "UnicodeTranscode", "UnicodeScript", "RegexFullMatch",
		"StaticRegexFullMatch", "DecodeBase64", "EncodeBase64", "UnsortedSegmentJoin", "DecodeCSV", "DecodeRaw",
		"DecodeJSONExample", "ParseTensor", "SerializeTensor"} {
		unsupportedWhy[op] = host
	}
	const ragged = "ragged tensors are not translated (tf.strings.split and ragged features make them); " +
		"use tf.compat.v1.string_split or tf.io.VarLenFeature, which give a SparseTensor"
	for _, op := range []string{"RaggedTensorToSparse", "RaggedTensorToTensor", "RaggedTensorFromVariant",
		"RaggedTensorToVariant", "RaggedGather", "RaggedRange"} {
		unsupportedWhy[op] = ragged
	}
	for _, op := range []string{"ParseSequenceExample", "ParseSequenceExampleV2", "ParseSingleSequenceExample"} {
		unsupportedWhy[op] = "tf.SequenceExample is not parsed; only ParseExample, ParseExampleV2 and ParseSingleExample of a serialized signature input are translated"
	}
}
