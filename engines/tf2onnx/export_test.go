package tf2onnx

// Exported for the tests of package tf2onnx_test.
var (
	ParseTFFloat = parseTFFloat
	ParseTFInt   = parseTFInt
)
