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

// hostAware wraps the ONNX translation of ops that also run on the host
// (Identity-like ops, Reshape, ExpandDims, Squeeze, Equal, NotEqual,
// Where, GatherNd, SparseToDense; Shape and Size of host values), so that feature pipelines keep the values host string
// ops read on the host: as TensorFlow's feature columns make sparse ids
// (ExpandDims, NotEqual to the ignored value, Where, GatherNd, then
// AsString and hashing). On a string, or on a host value not yet in the
// ONNX graph, the op runs on the host only; on a numeric signature input
// or host value already in the graph it runs in the model, and on the host
// too when a host op reads its result (unused host steps are pruned); with
// an input the model computes, it runs in the model.
func hostAware(onnx translator) translator {
	return func(c *converter, n *node) {
		if n.op == "Shape" || n.op == "Size" {
			// The shape of a host value is known on the host: the model
			// need not take the value for it.
			if v := c.peek(n, 0); v != nil && v.host != nil && (v.name == "" || v.dtype == tensor.String) {
				if a, ok := c.hostArg(n, 0); ok {
					if outs, eval, why := c.hostKernel(n, []HostRef{a}); why == "" {
						c.hostStep(n, []HostRef{a}, outs, eval)
						return
					}
				}
			}
			onnx(c, n)
			return
		}
		if n.op != "Reshape" && n.op != "ExpandDims" && n.op != "Squeeze" && n.op != "Equal" && n.op != "NotEqual" && n.op != "Where" && n.op != "GatherNd" && n.op != "SparseToDense" {
			// Identity-like: a host value passes as it is.
			if v := c.peek(n, 0); v != nil && v.host != nil && v.name == "" {
				c.set(n, 0, v)
				return
			}
			onnx(c, n)
			return
		}
		data := []int{0}
		switch n.op {
		case "Equal", "NotEqual", "GatherNd":
			data = []int{0, 1}
		case "SparseToDense":
			data = []int{0, 1, 2, 3}
		}
		hostOnly, some, all := false, false, true
		for _, i := range data {
			v := c.peek(n, i)
			switch {
			case v == nil:
				all = false
			case v.host != nil && (v.name == "" || v.dtype == tensor.String):
				hostOnly, some = true, true
			case v.port != nil && v.dtype == tensor.String:
				hostOnly, some = true, true
			case v.host != nil || v.port != nil:
				some = true
			case v.konst == nil:
				all = false
			}
		}
		if !all || !hostOnly && !some {
			// A value the model computes: the op runs there.
			onnx(c, n)
			return
		}
		var args []HostRef
		if hostOnly {
			for _, i := range data {
				a, ok := c.hostArg(n, i)
				if !ok {
					return
				}
				args = append(args, a)
			}
		} else {
			onnx(c, n)
			if slices.Contains(c.unsup[n.op], n.name) {
				return
			}
			for _, i := range data {
				a, ok := c.hostArg(n, i)
				if !ok {
					return
				}
				args = append(args, a)
			}
		}
		outs, eval, why := c.hostKernel(n, args)
		switch {
		case why != "" && hostOnly:
			c.unsupported(n, why)
		case why != "":
			// The model computes it; host ops cannot read it.
		case hostOnly:
			c.hostStep(n, args, outs, eval)
		default:
			i := c.addStep(HostStep{Op: n.op, Node: n.name, Args: args, eval: eval, outs: outs})
			for j := range outs {
				if v := c.vals[ref{n.name, j}]; v != nil {
					dual := *v
					dual.host = &HostRef{i, j}
					c.set(n, j, &dual)
				}
			}
		}
	}
}

// peek is the value of input i of n, without marking or materializing it.
func (c *converter) peek(n *node, i int) *value {
	if i >= len(n.inputs) {
		return nil
	}
	rr, err := c.g.resolve(n.inputs[i])
	if err != nil {
		return nil
	}
	return c.vals[rr]
}

// hostKernel is the host version of n on args: its outputs and kernel, or
// why there is none.
func (c *converter) hostKernel(n *node, args []HostRef) ([]hostOut, func([]tensor.Tensor) ([]tensor.Tensor, error), string) {
	o := c.hostOutOf(args[0])
	switch n.op {
	case "Reshape":
		s, ok := ints(c.in(n, 1).konst)
		if !ok {
			return nil, nil, "a tensor reshaped on the host needs a constant shape"
		}
		out := hostOut{dtype: o.dtype, rank: len(s), batch: o.batch && len(s) > 0 && s[0] == -1 && o.rank >= 1}
		return []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			t := in[0]
			dims, ok := reshapeDims(t.NumElements(), s)
			if !ok {
				return nil, fmt.Errorf("cannot reshape %s to %v", tensor.FormatShape(t.Shape), s)
			}
			t.Shape = dims
			return []tensor.Tensor{t}, nil
		}, ""
	case "ExpandDims", "Squeeze":
		var axes []int64
		if n.op == "ExpandDims" {
			var ok bool
			if axes, ok = ints(c.in(n, 1).konst); !ok || len(axes) != 1 {
				return nil, nil, "a tensor expanded on the host needs a constant axis"
			}
		} else {
			axes = n.ilist("squeeze_dims", nil)
		}
		out := hostOut{dtype: o.dtype, rank: -1}
		if o.rank >= 0 && n.op == "ExpandDims" {
			out.rank = o.rank + 1
			out.batch = o.batch && axes[0] != 0 && axes[0] != -int64(o.rank)-1
		} else if o.rank >= 0 && len(axes) > 0 {
			out.rank = o.rank - len(axes)
			out.batch = o.batch && !slices.ContainsFunc(axes, func(x int64) bool { return x == 0 || x == -int64(o.rank) })
		}
		expand := n.op == "ExpandDims"
		return []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			t := in[0]
			r := int64(len(t.Shape))
			if expand {
				x := axes[0]
				if x < -r-1 || x > r {
					return nil, fmt.Errorf("axis %d out of range for rank %d", x, r)
				}
				if x < 0 {
					x += r + 1
				}
				t.Shape = slices.Insert(slices.Clone(t.Shape), int(x), 1)
				return []tensor.Tensor{t}, nil
			}
			var shape []int64
			for d, k := range t.Shape {
				drop := len(axes) == 0 && k == 1
				for _, x := range axes {
					if x == int64(d) || x+r == int64(d) {
						if k != 1 {
							return nil, fmt.Errorf("cannot squeeze dimension %d of size %d", d, k)
						}
						drop = true
					}
				}
				if !drop {
					shape = append(shape, k)
				}
			}
			if shape == nil {
				shape = []int64{}
			}
			t.Shape = shape
			return []tensor.Tensor{t}, nil
		}, ""
	case "Equal", "NotEqual":
		b := c.hostOutOf(args[1])
		if o.dtype != b.dtype {
			return nil, nil, fmt.Sprintf("compares %s with %s", o.dtype, b.dtype)
		}
		out := hostOut{dtype: tensor.Bool, rank: max(o.rank, b.rank), batch: o.batch && b.rank == 0 || b.batch && o.rank == 0}
		if o.rank < 0 || b.rank < 0 {
			out.rank = -1
		}
		neq := n.op == "NotEqual"
		return []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			r, err := hostEqual(in[0], in[1], neq)
			return []tensor.Tensor{r}, err
		}, ""
	case "Shape", "Size":
		dt := n.dtype("out_type", tensor.Int32)
		if dt != tensor.Int32 && dt != tensor.Int64 {
			return nil, nil, fmt.Sprintf("out_type %s", dt)
		}
		size := n.op == "Size"
		out := hostOut{dtype: dt, rank: 1}
		if size {
			out.rank = 0
		}
		return []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			v := in[0].Shape
			shape := []int64{int64(len(v))}
			if size {
				v, shape = []int64{in[0].NumElements()}, []int64{}
			}
			r := tensor.FromInt64("", shape, v)
			if dt == tensor.Int32 {
				r, _ = castTensor(r, tensor.Int32)
			}
			return []tensor.Tensor{r}, nil
		}, ""
	case "SparseToDense":
		if d := c.hostOutOf(args[3]).dtype; d != o.dtype && c.hostOutOf(args[2]).dtype != d {
			return nil, nil, "default_value and values differ in dtype"
		}
		rank := -1
		if k := c.hostOutOf(args[1]).konst; k != nil && len(k.Shape) == 1 {
			rank = int(k.Shape[0])
		}
		return []hostOut{{dtype: c.hostOutOf(args[2]).dtype, rank: rank}}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			r, err := hostSparseToDense(in[0], in[1], in[2], in[3])
			return []tensor.Tensor{r}, err
		}, ""
	case "Where":
		if len(n.inputs) != 1 || o.dtype != tensor.Bool {
			return nil, nil, "Where of a bool tensor is run on the host"
		}
		return []hostOut{{dtype: tensor.Int64, rank: 2}}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			return []tensor.Tensor{hostWhere(in[0])}, nil
		}, ""
	case "GatherNd":
		if d := c.hostOutOf(args[1]).dtype; d != tensor.Int32 && d != tensor.Int64 {
			return nil, nil, fmt.Sprintf("indices of dtype %s", d)
		}
		return []hostOut{{dtype: o.dtype, rank: -1}}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			r, err := hostGatherNd(in[0], in[1])
			return []tensor.Tensor{r}, err
		}, ""
	}
	return nil, nil, "not run on the host"
}

// hostEqual compares a and b element-wise (one may be a scalar); floats
// by value, other dtypes by their bytes.
func hostEqual(a, b tensor.Tensor, neq bool) (tensor.Tensor, error) {
	shape := a.Shape
	na, nb := a.NumElements(), b.NumElements()
	switch {
	case slices.Equal(a.Shape, b.Shape):
	case len(b.Shape) == 0:
	case len(a.Shape) == 0:
		shape = b.Shape
	default:
		return tensor.Tensor{}, fmt.Errorf("shapes %s and %s: only equal shapes or a scalar are served", tensor.FormatShape(a.Shape), tensor.FormatShape(b.Shape))
	}
	n := max(na, nb)
	if na == 0 || nb == 0 {
		n = 0
	}
	out := make([]bool, n)
	sz := a.DType.Size()
	for i := range out {
		ia, ib := i, i
		if len(a.Shape) == 0 {
			ia = 0
		}
		if len(b.Shape) == 0 {
			ib = 0
		}
		var eq bool
		switch a.DType {
		case tensor.String:
			eq = bytes.Equal(a.Strings[ia], b.Strings[ib])
		case tensor.Float32:
			eq = math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*ia:])) == math.Float32frombits(binary.LittleEndian.Uint32(b.Data[4*ib:]))
		case tensor.Float64:
			eq = math.Float64frombits(binary.LittleEndian.Uint64(a.Data[8*ia:])) == math.Float64frombits(binary.LittleEndian.Uint64(b.Data[8*ib:]))
		default:
			eq = bytes.Equal(a.Data[sz*ia:sz*(ia+1)], b.Data[sz*ib:sz*(ib+1)])
		}
		out[i] = eq != neq
	}
	return tensor.FromBool("", shape, out), nil
}

// hostWhere is the coordinates of t's true elements, row-major.
func hostWhere(t tensor.Tensor) tensor.Tensor {
	r := len(t.Shape)
	var idx []int64
	k := int64(0)
	coord := make([]int64, r)
	for i, b := range t.Data {
		if b != 0 {
			rem := int64(i)
			for d := r - 1; d >= 0; d-- {
				coord[d] = rem % t.Shape[d]
				rem /= t.Shape[d]
			}
			idx = append(idx, coord...)
			k++
		}
	}
	return tensor.FromInt64("", []int64{k, int64(r)}, idx)
}

// hostGatherNd is GatherNd: each index tuple of the last dimension of
// indices picks a slice of params; one outside params is an error.
func hostGatherNd(p, indices tensor.Tensor) (tensor.Tensor, error) {
	iv, err := indicesOf(indices)
	if err != nil {
		return tensor.Tensor{}, err
	}
	if len(indices.Shape) == 0 {
		return tensor.Tensor{}, fmt.Errorf("indices must be at least a vector")
	}
	m := int(indices.Shape[len(indices.Shape)-1])
	if m > len(p.Shape) {
		return tensor.Tensor{}, fmt.Errorf("index depth %d for params of rank %d", m, len(p.Shape))
	}
	slice := int64(1)
	for _, d := range p.Shape[m:] {
		slice *= d
	}
	shape := append(slices.Clone(indices.Shape[:len(indices.Shape)-1]), p.Shape[m:]...)
	out := tensor.Tensor{DType: p.DType, Shape: shape}
	sz := int64(p.DType.Size())
	count := 0
	if m > 0 {
		count = len(iv) / m
	} else {
		count = 1
		for _, d := range indices.Shape[:len(indices.Shape)-1] {
			count *= int(d)
		}
	}
	for k := range count {
		off := int64(0)
		for j := range m {
			x := iv[k*m+j]
			if x < 0 || x >= p.Shape[j] {
				return tensor.Tensor{}, fmt.Errorf("indices[%d] = %v does not index into param shape %s", k, iv[k*m:k*m+m], tensor.FormatShape(p.Shape))
			}
			off = off*p.Shape[j] + x
		}
		off *= slice
		if p.DType == tensor.String {
			out.Strings = append(out.Strings, p.Strings[off:off+slice]...)
		} else {
			out.Data = append(out.Data, p.Data[off*sz:(off+slice)*sz]...)
		}
	}
	if p.DType == tensor.String && out.Strings == nil {
		out.Strings = [][]byte{}
	}
	return out, nil
}

// indicesOf reads an int32 or int64 tensor.
func indicesOf(t tensor.Tensor) ([]int64, error) {
	if t.DType == tensor.Int32 {
		v, err := t.AsInt32()
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out, err
	}
	return t.AsInt64()
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
	for _, op := range []string{"ParseSingleExample", "ParseSequenceExample", "ParseSequenceExampleV2", "ParseSingleSequenceExample"} {
		unsupportedWhy[op] = "only ParseExample and ParseExampleV2 of a serialized signature input are translated"
	}
}

// hostCast wraps Cast: a constant is cast at translation, and a cast of a
// numeric signature input or host value also runs on the host when a host
// op reads it (AsString of cast ids).
func hostCast(onnx translator) translator {
	return func(c *converter, n *node) {
		to := n.dtype("DstT", tensor.Float32)
		v := c.peek(n, 0)
		if v != nil && v.konst != nil {
			if r, ok := castTensor(*v.konst, to); ok {
				c.set(n, 0, c.constValue(r))
				return
			}
		}
		onnx(c, n)
		if v == nil || v.host == nil && v.port == nil || slices.Contains(c.unsup[n.op], n.name) {
			return
		}
		if !castable(v.dtype, to) {
			return
		}
		a, ok := c.hostArg(n, 0)
		if !ok {
			return
		}
		o := c.hostOutOf(a)
		i := c.addStep(HostStep{Op: n.op, Node: n.name, Args: []HostRef{a}, outs: []hostOut{{dtype: to, rank: o.rank, batch: o.batch}},
			eval: func(in []tensor.Tensor) ([]tensor.Tensor, error) {
				r, _ := castTensor(in[0], to)
				return []tensor.Tensor{r}, nil
			}})
		if w := c.vals[ref{n.name, 0}]; w != nil {
			dual := *w
			dual.host = &HostRef{i, 0}
			c.set(n, 0, &dual)
		}
	}
}

// castable reports whether castTensor casts from to to.
func castable(from, to tensor.DType) bool {
	ok := func(d tensor.DType) bool {
		return d == tensor.Bool || d == tensor.Int32 || d == tensor.Int64 || d == tensor.Float32 || d == tensor.Float64
	}
	return ok(from) && ok(to)
}

// castTensor casts between bool, int32, int64, float32 and float64 as
// C++'s static_cast does (floats to integers truncate).
func castTensor(t tensor.Tensor, to tensor.DType) (tensor.Tensor, bool) {
	if !castable(t.DType, to) {
		return t, false
	}
	n := int(t.NumElements())
	out := tensor.Tensor{DType: to, Shape: slices.Clone(t.Shape), Data: make([]byte, 0, n*to.Size())}
	for i := range n {
		var f float64
		var k int64
		isF := false
		switch t.DType {
		case tensor.Bool:
			k = int64(t.Data[i])
		case tensor.Int32:
			k = int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		case tensor.Int64:
			k = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		case tensor.Float32:
			f, isF = float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))), true
		case tensor.Float64:
			f, isF = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:])), true
		}
		if !isF {
			f = float64(k)
		} else {
			k = int64(f)
		}
		switch to {
		case tensor.Bool:
			b := byte(0)
			if isF && f != 0 || !isF && k != 0 {
				b = 1
			}
			out.Data = append(out.Data, b)
		case tensor.Int32:
			out.Data = binary.LittleEndian.AppendUint32(out.Data, uint32(int32(k)))
		case tensor.Int64:
			out.Data = binary.LittleEndian.AppendUint64(out.Data, uint64(k))
		case tensor.Float32:
			out.Data = binary.LittleEndian.AppendUint32(out.Data, math.Float32bits(float32(f)))
		case tensor.Float64:
			out.Data = binary.LittleEndian.AppendUint64(out.Data, math.Float64bits(f))
		}
	}
	return out, true
}

// hostSparseToDense is SparseToDense: default everywhere but at the
// indices (a scalar, a vector for a 1-D output, or [n, rank]), which take
// values (one each, or one for all); an index outside the shape is an
// error.
func hostSparseToDense(indices, shapeT, vals, def tensor.Tensor) (tensor.Tensor, error) {
	iv, err := indicesOf(indices)
	if err != nil {
		return tensor.Tensor{}, err
	}
	shape, err := indicesOf(shapeT)
	if err != nil {
		return tensor.Tensor{}, err
	}
	if len(shapeT.Shape) > 1 || vals.DType != def.DType || def.NumElements() != 1 {
		return tensor.Tensor{}, fmt.Errorf("output_shape must be a vector and default_value a scalar of the values' dtype")
	}
	rank := len(shape)
	n, m := int64(1), rank
	switch len(indices.Shape) {
	case 0:
	case 1:
		n, m = indices.Shape[0], 1
	case 2:
		n, m = indices.Shape[0], int(indices.Shape[1])
	default:
		return tensor.Tensor{}, fmt.Errorf("sparse_indices of rank %d", len(indices.Shape))
	}
	if m != rank {
		return tensor.Tensor{}, fmt.Errorf("indices of %d dimensions for an output of rank %d", m, rank)
	}
	nv := vals.NumElements()
	if nv != 1 && nv != n || len(vals.Shape) > 1 {
		return tensor.Tensor{}, fmt.Errorf("%d values for %d indices", nv, n)
	}
	total := int64(1)
	for _, d := range shape {
		if d < 0 {
			return tensor.Tensor{}, fmt.Errorf("output_shape %v has a negative dimension", shape)
		}
		total *= d
		if total > 1<<27 {
			return tensor.Tensor{}, fmt.Errorf("output_shape %v is too large", shape)
		}
	}
	out := tensor.Tensor{DType: vals.DType, Shape: shape}
	sz := int64(vals.DType.Size())
	if vals.DType == tensor.String {
		out.Strings = make([][]byte, total)
		for i := range out.Strings {
			out.Strings[i] = def.Strings[0]
		}
	} else {
		out.Data = bytes.Repeat(def.Data[:sz], int(total))
	}
	for k := range n {
		off := int64(0)
		for j := range m {
			x := iv[int(k)*m+j]
			if x < 0 || x >= shape[j] {
				return tensor.Tensor{}, fmt.Errorf("index %v is out of bounds for shape %v", iv[int(k)*m:int(k)*m+m], shape)
			}
			off = off*shape[j] + x
		}
		src := k
		if nv == 1 {
			src = 0
		}
		if vals.DType == tensor.String {
			out.Strings[off] = vals.Strings[src]
		} else {
			copy(out.Data[off*sz:(off+1)*sz], vals.Data[src*sz:(src+1)*sz])
		}
	}
	return out, nil
}
