package decoding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// TokenLogprob is one of the most likely tokens of a step.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Sampler chooses one sequence's tokens. It is not safe for concurrent use;
// each sequence has its own, so a seeded sequence draws the same tokens
// whatever else is in the batch.
//
// The logprobs it returns are those of the processed distribution, the one
// the token is drawn from: log-softmax of the logits after the penalties,
// the temperature and the top-k/top-p/min-p filters (vLLM's
// "processed_logprobs"; vLLM's default is the raw model's). Filtered tokens
// have -Inf and never appear among the top logprobs. When greedy, the
// distribution is the penalized logits at temperature 1, unfiltered.
type Sampler struct {
	p     Params
	vocab int
	rng   *rand.Rand

	seen     []bool  // in the prompt or the output, for repetition_penalty
	seenList []int32 // the distinct ids of seen
	count    []int32 // occurrences in the output
	outList  []int32 // the distinct ids of count
	nOut     int
	masked   []int32 // stop and eos ids masked until min_tokens

	logits []float32 // the processed logits of the step
	scr    []float32 // scratch for top-k's selection
	idx    []int32   // scratch for top-p's sort
	top    []TokenLogprob
}

// NewSampler starts a sequence of a vocabulary of vocab tokens after prompt.
// p must be valid (Validate).
func NewSampler(p Params, prompt []int32, vocab int) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if vocab < 1 {
		return nil, fmt.Errorf("decoding: vocabulary of %d tokens", vocab)
	}
	seed := p.Seed
	if !p.HasSeed {
		seed = rand.Uint64()
	}
	s := &Sampler{
		p:      p,
		vocab:  vocab,
		rng:    rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		logits: make([]float32, vocab),
		top:    make([]TokenLogprob, 0, p.TopLogprobs),
	}
	if p.RepetitionPenalty != 1 {
		s.seen = make([]bool, vocab)
		for _, id := range prompt {
			if id < 0 || int(id) >= vocab {
				return nil, fmt.Errorf("decoding: prompt token %d outside the vocabulary of %d", id, vocab)
			}
			s.markSeen(id)
		}
	}
	if p.PresencePenalty != 0 || p.FrequencyPenalty != 0 {
		s.count = make([]int32, vocab)
	}
	if p.MinTokens > 0 {
		s.masked = append(s.masked, p.StopTokenIDs...)
		s.masked = append(s.masked, p.EOSTokenIDs...)
	}
	return s, nil
}

func (s *Sampler) markSeen(id int32) {
	if !s.seen[id] {
		s.seen[id] = true
		s.seenList = append(s.seenList, id)
	}
}

// Generated is how many tokens Next has chosen.
func (s *Sampler) Generated() int { return s.nOut }

// Next chooses the next token from the model's logits (len vocab) and
// records it. It returns the token, its logprob and, when TopLogprobs > 0,
// the most likely tokens, most likely first (the slice is reused by the next
// call). logits are not modified.
func (s *Sampler) Next(logits []float32) (token int32, logprob float32, top []TokenLogprob) {
	if len(logits) != s.vocab {
		panic(fmt.Sprintf("decoding: %d logits for a vocabulary of %d", len(logits), s.vocab))
	}
	l := s.process(logits)
	mx, lse := logSumExp(l)
	if s.p.Greedy() {
		token = argmax(l)
	} else {
		token = s.draw(l, mx, lse)
	}
	logprob = float32(float64(l[token]) - mx - lse)
	if s.p.TopLogprobs > 0 {
		top = s.topLogprobs(l, mx+lse)
	}
	s.record(token)
	return token, logprob, top
}

func (s *Sampler) record(id int32) {
	s.nOut++
	if s.seen != nil {
		s.markSeen(id)
	}
	if s.count != nil {
		if s.count[id] == 0 {
			s.outList = append(s.outList, id)
		}
		s.count[id]++
	}
}

// process writes the processed logits into s.logits, in vLLM's order:
// min_tokens masking, penalties (repetition, frequency, presence), then
// temperature, top-k, top-p, min-p.
func (s *Sampler) process(logits []float32) []float32 {
	l := s.logits
	copy(l, logits)
	ninf := float32(math.Inf(-1))
	if s.nOut < s.p.MinTokens {
		for _, id := range s.masked {
			if id >= 0 && int(id) < len(l) {
				l[id] = ninf
			}
		}
	}
	if rp := float32(s.p.RepetitionPenalty); s.seen != nil {
		for _, id := range s.seenList {
			if l[id] > 0 {
				l[id] /= rp
			} else {
				l[id] *= rp
			}
		}
	}
	if s.count != nil {
		fp, pp := float32(s.p.FrequencyPenalty), float32(s.p.PresencePenalty)
		for _, id := range s.outList {
			l[id] -= fp*float32(s.count[id]) + pp
		}
	}
	if s.p.Greedy() {
		return l
	}
	if t := float32(s.p.Temperature); t != 1 {
		for i := range l {
			l[i] /= t
		}
	}
	if k := s.p.TopK; k > 0 && k < len(l) {
		th := s.kthLargest(l, k)
		for i, v := range l {
			if v < th {
				l[i] = ninf
			}
		}
	}
	if s.p.TopP < 1 {
		s.topP(l)
	}
	if s.p.MinP > 0 {
		mx := l[argmax(l)]
		// probs < min_p*top_prob, in logits: l < mx + log(min_p).
		th := float64(mx) + math.Log(s.p.MinP)
		for i, v := range l {
			if float64(v) < th {
				l[i] = ninf
			}
		}
	}
	return l
}

// kthLargest returns the k-th largest of l (1-based), by quickselect on a
// scratch copy.
func (s *Sampler) kthLargest(l []float32, k int) float32 {
	a := append(s.scr[:0], l...)
	s.scr = a
	lo, hi, want := 0, len(a)-1, k-1 // position in descending order
	for lo < hi {
		p := a[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for a[i] > p {
				i++
			}
			for a[j] < p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case want <= j:
			hi = j
		case want >= i:
			lo = i
		default:
			return a[want]
		}
	}
	return a[want]
}

// topP keeps the most likely tokens while the probability of those before
// them is below top_p: the token that crosses it is kept, and always the
// most likely one (Hugging Face's TopPLogitsWarper). The kept tokens are a
// prefix of the vocabulary sorted by (logit descending, id ascending), so
// instead of sorting it finds the last kept token by a weighted quickselect
// (three-way partitions around a pivot logit, each side's probability mass
// deciding where the cut lies): linear time in the vocabulary, whatever the
// distribution's shape.
func (s *Sampler) topP(l []float32) {
	idx := s.idx[:0]
	for i, v := range l {
		if !math.IsInf(float64(v), -1) {
			idx = append(idx, int32(i))
		}
	}
	s.idx = idx
	if len(idx) == 0 {
		return
	}
	mx, lse := logSumExp(l)
	target := s.p.TopP * math.Exp(lse)
	prob := func(i int32) float64 { return math.Exp(float64(l[i]) - mx) }
	before := 0.0 // the mass ranked above idx[lo:hi]
	lo, hi := 0, len(idx)
	lastV, lastI := float32(0), int32(-1) // the last kept token
	for {
		if hi-lo <= 16 {
			r := idx[lo:hi]
			slices.SortFunc(r, func(a, b int32) int {
				switch {
				case l[a] > l[b]:
					return -1
				case l[a] < l[b]:
					return 1
				}
				return int(a - b)
			})
			for n, id := range r {
				if n > 0 && before >= target {
					break
				}
				lastV, lastI = l[id], id
				before += prob(id)
			}
			break
		}
		// Three-way partition of idx[lo:hi] around the pivot's logit:
		// [lo, gt) above it, [gt, lt) equal, [lt, hi) below.
		pv := l[idx[lo+(hi-lo)/2]]
		gt, i, lt := lo, lo, hi
		for i < lt {
			switch v := l[idx[i]]; {
			case v > pv:
				idx[gt], idx[i] = idx[i], idx[gt]
				gt++
				i++
			case v < pv:
				lt--
				idx[lt], idx[i] = idx[i], idx[lt]
			default:
				i++
			}
		}
		above := 0.0
		for _, id := range idx[lo:gt] {
			above += prob(id)
		}
		if gt > lo && before+above >= target {
			// The cut is inside the tokens above the pivot, or right
			// after them: narrow to them. Their last one is kept unless
			// the cut comes earlier, which the narrower range decides.
			hi = gt
			continue
		}
		before += above
		// The ties at the pivot, in id order.
		eq := idx[gt:lt]
		slices.Sort(eq)
		done := false
		for _, id := range eq {
			if before >= target {
				done = true
				break
			}
			lastV, lastI = l[id], id
			before += prob(id)
		}
		if done || before >= target || lt == hi {
			if lastI < 0 {
				// Nothing of this range kept: the cut fell right after
				// the tokens above it, whose last is the pivot's successor
				// in rank; find it among idx[lo:gt] (the smallest logit,
				// then the largest id).
				for _, id := range idx[lo:gt] {
					if lastI < 0 || l[id] < lastV || l[id] == lastV && id > lastI {
						lastV, lastI = l[id], id
					}
				}
			}
			break
		}
		lo = lt
	}
	ninf := float32(math.Inf(-1))
	for i, v := range l {
		if v < lastV || v == lastV && int32(i) > lastI {
			l[i] = ninf
		}
	}
}

// draw samples from softmax(l): one uniform draw, walked through the
// cumulative sum in vocabulary order.
func (s *Sampler) draw(l []float32, mx, lse float64) int32 {
	u := s.rng.Float64() * math.Exp(lse)
	var cum float64
	last := int32(-1)
	for i, v := range l {
		if math.IsInf(float64(v), -1) {
			continue
		}
		cum += math.Exp(float64(v) - mx)
		last = int32(i)
		if u < cum {
			return last
		}
	}
	return last // rounding left u at the total
}

// topLogprobs returns the TopLogprobs largest of l as logprobs (norm is the
// log of the normalizer), most likely first, lower ids first among equals.
func (s *Sampler) topLogprobs(l []float32, norm float64) []TokenLogprob {
	n := s.p.TopLogprobs
	t := s.top[:0]
	for i, v := range l {
		if math.IsInf(float64(v), -1) {
			continue
		}
		if len(t) == n && v <= t[n-1].Logprob {
			continue
		}
		if len(t) < n {
			t = append(t, TokenLogprob{})
		}
		j := len(t) - 1
		for j > 0 && t[j-1].Logprob < v {
			t[j] = t[j-1]
			j--
		}
		t[j] = TokenLogprob{Token: int32(i), Logprob: v}
	}
	for i := range t {
		t[i].Logprob = float32(float64(t[i].Logprob) - norm)
	}
	s.top = t
	return t
}

// argmax is the first index of the largest value (torch.argmax's choice).
func argmax(l []float32) int32 {
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	return int32(best)
}

// logSumExp returns max(l) and log(sum(exp(l - max))), in float64.
func logSumExp(l []float32) (mx, lse float64) {
	mx = float64(l[argmax(l)])
	var sum float64
	for _, v := range l {
		sum += math.Exp(float64(v) - mx)
	}
	return mx, math.Log(sum)
}
