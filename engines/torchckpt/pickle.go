package torchckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// The Python values a state_dict's pickle builds.
type (
	pyGlobal struct{ module, name string }
	pyTuple  []any
	pyList   struct{ items []any }
	pyDict   struct {
		keys, vals []any
		index      map[any]int
	}
	pyStorage struct {
		class string // FloatStorage, ...
		key   string // its file under data/
	}
	pyTensor struct {
		storage      *pyStorage
		offset       int64
		size, stride []int64
	}
	pyMark struct{}
)

func newDict() *pyDict { return &pyDict{index: map[any]int{}} }

func (d *pyDict) set(k, v any) error {
	switch k.(type) {
	case string, int64, bool, nil, float64:
	default:
		return fmt.Errorf("a dict key is a %s", typeName(k))
	}
	if i, ok := d.index[k]; ok {
		d.vals[i] = v
		return nil
	}
	d.index[k] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

func typeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case string:
		return "str"
	case int64:
		return "int"
	case float64:
		return "float"
	case bool:
		return "bool"
	case []byte:
		return "bytes"
	case pyTuple:
		return "tuple"
	case *pyList:
		return "list"
	case *pyDict:
		return "dict"
	case *pyTensor:
		return "tensor"
	case *pyStorage:
		return "storage"
	case pyGlobal:
		return v.module + "." + v.name
	}
	return fmt.Sprintf("%T", v)
}

// allowedGlobal says whether a state_dict's pickle may name module.name.
func allowedGlobal(module, name string) bool {
	switch module + "." + name {
	case "collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
		"torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state":
		return true
	}
	_, ok := storageTypes[name]
	return module == "torch" && ok
}

// unpickler runs a pickle's opcodes over a restricted set of values: no
// global outside allowedGlobal is looked up, no callable but those is
// called, and every object is built by this code.
type unpickler struct {
	data  []byte
	pos   int
	stack []any
	marks []int
	memo  map[uint32]any
}

var errTruncated = errors.New("the pickle ends early")

func (u *unpickler) take(n int) ([]byte, error) {
	if n < 0 || n > len(u.data)-u.pos {
		return nil, errTruncated
	}
	b := u.data[u.pos : u.pos+n]
	u.pos += n
	return b, nil
}

func (u *unpickler) byte1() (byte, error) {
	b, err := u.take(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (u *unpickler) uint(n int) (uint64, error) {
	b, err := u.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

func (u *unpickler) line() (string, error) {
	i := strings.IndexByte(string(u.data[u.pos:min(len(u.data), u.pos+1024)]), '\n')
	if i < 0 {
		return "", errors.New("a GLOBAL's name has no end")
	}
	s := string(u.data[u.pos : u.pos+i])
	u.pos += i + 1
	return s, nil
}

func (u *unpickler) push(v any) { u.stack = append(u.stack, v) }

func (u *unpickler) pop() (any, error) {
	if len(u.stack) == 0 {
		return nil, errors.New("the pickle pops an empty stack")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	if _, ok := v.(pyMark); ok {
		return nil, errors.New("the pickle pops a mark")
	}
	return v, nil
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) == 0 {
		return nil, errors.New("the pickle reads an empty stack")
	}
	return u.stack[len(u.stack)-1], nil
}

// popMark returns the values above the last mark and removes them and it.
func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, errors.New("the pickle has no mark to pop")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := append([]any(nil), u.stack[m+1:]...)
	u.stack = u.stack[:m]
	return items, nil
}

// The pickle opcodes read here (protocols 2 to 5 as torch.save writes them).
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opNone           = 'N'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opBinString      = 'T'
	opShortBinString = 'U'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opBinGet         = 'h'
	opLongBinGet     = 'j'
	opList           = 'l'
	opEmptyList      = ']'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetItems       = 'u'
	opBinFloat       = 'G'
	opProto          = 0x80
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opBinBytes       = 'B'
	opShortBinBytes  = 'C'
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinBytes8      = 0x8e
	opMemoize        = 0x94
	opFrame          = 0x95
	opStackGlobal    = 0x93
)

// run executes the pickle and returns the value STOP leaves.
func (u *unpickler) run() (any, error) {
	u.memo = map[uint32]any{}
	for {
		if u.pos >= len(u.data) {
			return nil, errTruncated
		}
		op := u.data[u.pos]
		u.pos++
		if err := u.step(op); err != nil {
			if err == errStop {
				v, err := u.pop()
				if err != nil {
					return nil, err
				}
				return v, nil
			}
			return nil, fmt.Errorf("at byte %d (opcode 0x%02x): %w", u.pos-1, op, err)
		}
	}
}

var errStop = errors.New("stop")

func (u *unpickler) str(n int, err error) error {
	if err != nil {
		return err
	}
	b, err := u.take(n)
	if err != nil {
		return err
	}
	u.push(string(b))
	return nil
}

func (u *unpickler) step(op byte) error {
	switch op {
	case opProto:
		_, err := u.byte1()
		return err
	case opFrame:
		_, err := u.take(8)
		return err
	case opStop:
		return errStop
	case opMark:
		u.marks = append(u.marks, len(u.stack))
		u.push(pyMark{})
	case opPop:
		_, err := u.pop()
		return err
	case opPopMark:
		_, err := u.popMark()
		return err
	case opDup:
		v, err := u.top()
		if err != nil {
			return err
		}
		u.push(v)
	case opNone:
		u.push(nil)
	case opNewTrue:
		u.push(true)
	case opNewFalse:
		u.push(false)
	case opBinInt:
		v, err := u.uint(4)
		if err != nil {
			return err
		}
		u.push(int64(int32(uint32(v))))
	case opBinInt1:
		v, err := u.uint(1)
		if err != nil {
			return err
		}
		u.push(int64(v))
	case opBinInt2:
		v, err := u.uint(2)
		if err != nil {
			return err
		}
		u.push(int64(v))
	case opLong1:
		n, err := u.byte1()
		if err != nil {
			return err
		}
		if n > 8 {
			return fmt.Errorf("an integer of %d bytes", n)
		}
		v, err := u.uint(int(n))
		if err != nil {
			return err
		}
		if n > 0 && n < 8 && v&(1<<(8*uint(n)-1)) != 0 {
			v |= ^uint64(0) << (8 * uint(n))
		}
		u.push(int64(v))
	case opBinFloat:
		b, err := u.take(8)
		if err != nil {
			return err
		}
		u.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
	case opShortBinUni, opShortBinString:
		n, err := u.byte1()
		return u.str(int(n), err)
	case opBinUnicode, opBinString:
		n, err := u.uint(4)
		return u.str(int(min(n, math.MaxInt32)), err)
	case opBinUnicode8:
		n, err := u.uint(8)
		return u.str(int(min(n, math.MaxInt32)), err)
	case opShortBinBytes, opBinBytes, opBinBytes8:
		w := map[byte]int{opShortBinBytes: 1, opBinBytes: 4, opBinBytes8: 8}[op]
		n, err := u.uint(w)
		if err != nil {
			return err
		}
		b, err := u.take(int(min(n, math.MaxInt32)))
		if err != nil {
			return err
		}
		u.push(append([]byte(nil), b...))
	case opEmptyTuple:
		u.push(pyTuple{})
	case opTuple1, opTuple2, opTuple3:
		n := int(op - opTuple1 + 1)
		if len(u.stack) < n {
			return errors.New("a tuple of more values than the stack has")
		}
		t := make(pyTuple, n)
		for i := n - 1; i >= 0; i-- {
			v, err := u.pop()
			if err != nil {
				return err
			}
			t[i] = v
		}
		u.push(t)
	case opTuple:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		u.push(pyTuple(items))
	case opEmptyList:
		u.push(&pyList{})
	case opList:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		u.push(&pyList{items: items})
	case opEmptyDict:
		u.push(newDict())
	case opDict:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		d := newDict()
		if err := setItems(d, items); err != nil {
			return err
		}
		u.push(d)
	case opAppend:
		v, err := u.pop()
		if err != nil {
			return err
		}
		l, err := u.top()
		if err != nil {
			return err
		}
		pl, ok := l.(*pyList)
		if !ok {
			return fmt.Errorf("APPEND to a %s", typeName(l))
		}
		pl.items = append(pl.items, v)
	case opAppends:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		l, err := u.top()
		if err != nil {
			return err
		}
		pl, ok := l.(*pyList)
		if !ok {
			return fmt.Errorf("APPENDS to a %s", typeName(l))
		}
		pl.items = append(pl.items, items...)
	case opSetItem:
		v, err := u.pop()
		if err != nil {
			return err
		}
		k, err := u.pop()
		if err != nil {
			return err
		}
		d, err := u.top()
		if err != nil {
			return err
		}
		pd, ok := d.(*pyDict)
		if !ok {
			return fmt.Errorf("SETITEM on a %s", typeName(d))
		}
		return pd.set(k, v)
	case opSetItems:
		items, err := u.popMark()
		if err != nil {
			return err
		}
		d, err := u.top()
		if err != nil {
			return err
		}
		pd, ok := d.(*pyDict)
		if !ok {
			return fmt.Errorf("SETITEMS on a %s", typeName(d))
		}
		return setItems(pd, items)
	case opBinPut, opLongBinPut:
		w := 1
		if op == opLongBinPut {
			w = 4
		}
		i, err := u.uint(w)
		if err != nil {
			return err
		}
		v, err := u.top()
		if err != nil {
			return err
		}
		u.memo[uint32(i)] = v
	case opMemoize:
		v, err := u.top()
		if err != nil {
			return err
		}
		u.memo[uint32(len(u.memo))] = v
	case opBinGet, opLongBinGet:
		w := 1
		if op == opLongBinGet {
			w = 4
		}
		i, err := u.uint(w)
		if err != nil {
			return err
		}
		v, ok := u.memo[uint32(i)]
		if !ok {
			return fmt.Errorf("memo %d is not set", i)
		}
		u.push(v)
	case opGlobal:
		mod, err := u.line()
		if err != nil {
			return err
		}
		name, err := u.line()
		if err != nil {
			return err
		}
		return u.global(mod, name)
	case opStackGlobal:
		name, err := u.pop()
		if err != nil {
			return err
		}
		mod, err := u.pop()
		if err != nil {
			return err
		}
		ms, ok1 := mod.(string)
		ns, ok2 := name.(string)
		if !ok1 || !ok2 {
			return errors.New("STACK_GLOBAL of a non-string")
		}
		return u.global(ms, ns)
	case opBinPersID:
		pid, err := u.pop()
		if err != nil {
			return err
		}
		st, err := persistentStorage(pid)
		if err != nil {
			return err
		}
		u.push(st)
	case opReduce:
		args, err := u.pop()
		if err != nil {
			return err
		}
		fn, err := u.pop()
		if err != nil {
			return err
		}
		v, err := reduce(fn, args)
		if err != nil {
			return err
		}
		u.push(v)
	case opBuild:
		if _, err := u.pop(); err != nil { // the state: a dict's attributes (_metadata)
			return err
		}
		v, err := u.top()
		if err != nil {
			return err
		}
		if _, ok := v.(*pyDict); !ok {
			return fmt.Errorf("BUILD of a %s", typeName(v))
		}
	default:
		return fmt.Errorf("opcode 0x%02x is not one a state_dict's pickle uses", op)
	}
	return nil
}

func setItems(d *pyDict, items []any) error {
	if len(items)%2 != 0 {
		return errors.New("SETITEMS of an odd number of values")
	}
	for i := 0; i < len(items); i += 2 {
		if err := d.set(items[i], items[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func (u *unpickler) global(mod, name string) error {
	if !allowedGlobal(mod, name) {
		return fmt.Errorf("the pickle names %s.%s, which a state_dict does not need: refused (this reader executes nothing; save model.state_dict(), not the model)", mod, name)
	}
	u.push(pyGlobal{mod, name})
	return nil
}

// persistentStorage reads torch's persistent id of a storage:
// ("storage", torch.FloatStorage, key, location, numel).
func persistentStorage(pid any) (*pyStorage, error) {
	t, ok := pid.(pyTuple)
	if !ok || len(t) != 5 || t[0] != "storage" {
		return nil, fmt.Errorf("a persistent id %v is not torch's (\"storage\", type, key, location, numel)", typeName(pid))
	}
	g, ok := t[1].(pyGlobal)
	if !ok || g.module != "torch" {
		return nil, fmt.Errorf("a storage of type %s", typeName(t[1]))
	}
	if _, ok := storageTypes[g.name]; !ok {
		return nil, fmt.Errorf("a storage of type torch.%s", g.name)
	}
	key, ok := t[2].(string)
	if !ok || key == "" || strings.ContainsAny(key, "/\\") || key == "." || key == ".." {
		return nil, fmt.Errorf("a storage key %v", t[2])
	}
	return &pyStorage{class: g.name, key: key}, nil
}

func ints(v any) ([]int64, error) {
	t, ok := v.(pyTuple)
	if !ok {
		return nil, fmt.Errorf("a %s where a tuple of ints belongs", typeName(v))
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("a %s in a tuple of ints", typeName(x))
		}
		out[i] = n
	}
	return out, nil
}

// reduce calls one of the allowed callables.
func reduce(fn, args any) (any, error) {
	g, ok := fn.(pyGlobal)
	if !ok {
		return nil, fmt.Errorf("REDUCE calls a %s", typeName(fn))
	}
	a, ok := args.(pyTuple)
	if !ok {
		return nil, fmt.Errorf("REDUCE with %s arguments", typeName(args))
	}
	switch g.module + "." + g.name {
	case "collections.OrderedDict":
		if len(a) != 0 {
			return nil, errors.New("OrderedDict called with arguments")
		}
		return newDict(), nil
	case "torch._utils._rebuild_tensor_v2":
		if len(a) < 4 {
			return nil, errors.New("_rebuild_tensor_v2 with too few arguments")
		}
		st, ok := a[0].(*pyStorage)
		if !ok {
			return nil, fmt.Errorf("_rebuild_tensor_v2 of a %s", typeName(a[0]))
		}
		off, ok := a[1].(int64)
		if !ok {
			return nil, errors.New("_rebuild_tensor_v2 with a non-integer offset")
		}
		size, err := ints(a[2])
		if err != nil {
			return nil, err
		}
		stride, err := ints(a[3])
		if err != nil {
			return nil, err
		}
		if len(size) > 16 {
			return nil, fmt.Errorf("a tensor of rank %d", len(size))
		}
		return &pyTensor{storage: st, offset: off, size: size, stride: stride}, nil
	case "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state":
		if len(a) < 1 {
			return nil, errors.New("_rebuild_parameter without arguments")
		}
		t, ok := a[0].(*pyTensor)
		if !ok {
			return nil, fmt.Errorf("_rebuild_parameter of a %s", typeName(a[0]))
		}
		return t, nil
	}
	return nil, fmt.Errorf("REDUCE calls %s", typeName(fn))
}
