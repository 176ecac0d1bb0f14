package pmml

func (cc *compiler) knn(n *node, m *model, sc *scope) error               { return n.unsupported("") }
