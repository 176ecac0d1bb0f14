package pmml

func (cc *compiler) scorecard(n *node, m *model, sc *scope) error         { return n.unsupported("") }
func (cc *compiler) knn(n *node, m *model, sc *scope) error               { return n.unsupported("") }
