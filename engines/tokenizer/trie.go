package tokenizer

// byteTrie maps byte strings to values, for longest-match and
// common-prefix searches (added tokens, Unigram's pieces).
type byteTrie struct {
	next  map[uint64]int32 // node<<8 | byte -> child
	value []int32          // per node, -1: no string ends here
	first [256]bool        // bytes a string starts with
}

func newByteTrie() *byteTrie { return &byteTrie{next: map[uint64]int32{}, value: []int32{-1}} }

func (t *byteTrie) insert(s string, v int32) {
	if s == "" {
		return
	}
	t.first[s[0]] = true
	node := int32(0)
	for i := 0; i < len(s); i++ {
		k := uint64(node)<<8 | uint64(s[i])
		c, ok := t.next[k]
		if !ok {
			c = int32(len(t.value))
			t.value = append(t.value, -1)
			t.next[k] = c
		}
		node = c
	}
	t.value[node] = v
}

// longestAt is the longest string starting at s[i:]: its end and value, or
// -1.
func (t *byteTrie) longestAt(s string, i int) (int, int32) {
	end, val := -1, int32(-1)
	node := int32(0)
	for j := i; j < len(s); j++ {
		c, ok := t.next[uint64(node)<<8|uint64(s[j])]
		if !ok {
			break
		}
		node = c
		if v := t.value[node]; v >= 0 {
			end, val = j+1, v
		}
	}
	return end, val
}

// prefixes calls f with the end and value of every string that s[i:]
// starts with, shortest first.
func (t *byteTrie) prefixes(s string, i int, f func(end int, v int32)) {
	node := int32(0)
	for j := i; j < len(s); j++ {
		c, ok := t.next[uint64(node)<<8|uint64(s[j])]
		if !ok {
			return
		}
		node = c
		if v := t.value[node]; v >= 0 {
			f(j+1, v)
		}
	}
}
