package pmml

import (
	"math"
	"strings"
	"testing"
)

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// TestModelTypes scores small hand-written models of every other type; each
// expectation is the model's arithmetic written out in Go.
func TestModelTypes(t *testing.T) {
	softmax3 := func(a, b, c float64) [3]float64 {
		s := math.Exp(a) + math.Exp(b) + math.Exp(c)
		return [3]float64{math.Exp(a) / s, math.Exp(b) / s, math.Exp(c) / s}
	}
	gauss := func(x, mu, v float64) float64 { return math.Exp(-(x-mu)*(x-mu)/(2*v)) / math.Sqrt(2*math.Pi*v) }
	glm := softmax3(1+0.5*2, -1+2, 0)
	nbP := 30 * (20.0 / 30) * gauss(1, 0, 1)
	nbQ := 10 * (2.0 / 10) * gauss(1, 2, 1)
	cases := []struct {
		name string
		doc  string
		in   map[string]Value
		want map[string]Value
	}{
		{
			name: "neural network",
			doc: `<PMML version="4.4"><DataDictionary><DataField name="y" optype="continuous" dataType="double"/>
<DataField name="x1" optype="continuous" dataType="double"/><DataField name="x2" optype="continuous" dataType="double"/></DataDictionary>
<NeuralNetwork functionName="regression" activationFunction="logistic"><MiningSchema><MiningField name="y" usageType="target"/><MiningField name="x1"/><MiningField name="x2"/></MiningSchema>
<NeuralInputs><NeuralInput id="i1"><DerivedField optype="continuous" dataType="double"><FieldRef field="x1"/></DerivedField></NeuralInput>
<NeuralInput id="i2"><DerivedField optype="continuous" dataType="double"><FieldRef field="x2"/></DerivedField></NeuralInput></NeuralInputs>
<NeuralLayer><Neuron id="n1" bias="0"><Con from="i1" weight="1"/><Con from="i2" weight="-1"/></Neuron>
<Neuron id="n2" bias="0.5"><Con from="i1" weight="0.5"/><Con from="i2" weight="0.5"/></Neuron></NeuralLayer>
<NeuralLayer activationFunction="identity"><Neuron id="n3" bias="1"><Con from="n1" weight="2"/><Con from="n2" weight="-1"/></Neuron></NeuralLayer>
<NeuralOutputs><NeuralOutput outputNeuron="n3"><DerivedField optype="continuous" dataType="double"><FieldRef field="y"/></DerivedField></NeuralOutput></NeuralOutputs>
</NeuralNetwork></PMML>`,
			in:   map[string]Value{"x1": FloatValue(1), "x2": FloatValue(1)},
			want: map[string]Value{"y": FloatValue(1 + 2*sigmoid(0) - sigmoid(1.5))},
		},
		{
			name: "clustering",
			doc: `<PMML version="4.4"><DataDictionary><DataField name="a" optype="continuous" dataType="double"/><DataField name="b" optype="continuous" dataType="double"/></DataDictionary>
<ClusteringModel functionName="clustering" modelClass="centerBased" numberOfClusters="2"><MiningSchema><MiningField name="a"/><MiningField name="b"/></MiningSchema>
<Output><OutputField name="id" feature="predictedValue"/><OutputField name="name" feature="predictedDisplayValue"/><OutputField name="dB" feature="affinity" value="B"/></Output>
<ComparisonMeasure kind="distance"><euclidean/></ComparisonMeasure>
<ClusteringField field="a"/><ClusteringField field="b"/>
<Cluster id="A" name="near"><Array n="2" type="real">0 0</Array></Cluster><Cluster id="B" name="far"><Array n="2" type="real">10 10</Array></Cluster>
</ClusteringModel></PMML>`,
			in:   map[string]Value{"a": FloatValue(3), "b": FloatValue(4)},
			want: map[string]Value{"id": StringValue("A"), "name": StringValue("near"), "dB": FloatValue(math.Sqrt(49 + 36))},
		},
		{
			name: "general regression multinomial",
			doc: `<PMML version="4.4"><DataDictionary><DataField name="y" optype="categorical" dataType="string"><Value value="a"/><Value value="b"/><Value value="c"/></DataField>
<DataField name="x" optype="continuous" dataType="double"/><DataField name="g" optype="categorical" dataType="string"/></DataDictionary>
<GeneralRegressionModel modelType="multinomialLogistic" functionName="classification" targetReferenceCategory="c">
<MiningSchema><MiningField name="y" usageType="target"/><MiningField name="x"/><MiningField name="g"/></MiningSchema>
<Output><OutputField name="pa" feature="probability" value="a"/><OutputField name="pc" feature="probability" value="c"/></Output>
<ParameterList><Parameter name="p0"/><Parameter name="p1"/><Parameter name="p2"/></ParameterList>
<FactorList><Predictor name="g"/></FactorList><CovariateList><Predictor name="x"/></CovariateList>
<PPMatrix><PPCell value="1" predictorName="x" parameterName="p1"/><PPCell value="u" predictorName="g" parameterName="p2"/></PPMatrix>
<ParamMatrix><PCell targetCategory="a" parameterName="p0" beta="1"/><PCell targetCategory="a" parameterName="p1" beta="0.5"/>
<PCell targetCategory="b" parameterName="p0" beta="-1"/><PCell targetCategory="b" parameterName="p2" beta="2"/></ParamMatrix>
</GeneralRegressionModel></PMML>`,
			in:   map[string]Value{"x": FloatValue(2), "g": StringValue("u")},
			want: map[string]Value{"y": StringValue("a"), "pa": FloatValue(glm[0]), "pc": FloatValue(glm[2])},
		},
		{
			name: "support vector machine",
			doc: `<PMML version="4.4"><DataDictionary><DataField name="y" optype="categorical" dataType="string"><Value value="yes"/><Value value="no"/></DataField>
<DataField name="x1" optype="continuous" dataType="double"/><DataField name="x2" optype="continuous" dataType="double"/></DataDictionary>
<SupportVectorMachineModel functionName="classification"><MiningSchema><MiningField name="y" usageType="target"/><MiningField name="x1"/><MiningField name="x2"/></MiningSchema>
<LinearKernelType/>
<VectorDictionary numberOfVectors="2"><VectorFields numberOfFields="2"><FieldRef field="x1"/><FieldRef field="x2"/></VectorFields>
<VectorInstance id="v1"><Array n="2" type="real">1 0</Array></VectorInstance>
<VectorInstance id="v2"><REAL-SparseArray n="2"><Indices>2</Indices><REAL-Entries>1</REAL-Entries></REAL-SparseArray></VectorInstance></VectorDictionary>
<SupportVectorMachine targetCategory="yes" alternateTargetCategory="no"><SupportVectors numberOfSupportVectors="2"><SupportVector vectorId="v1"/><SupportVector vectorId="v2"/></SupportVectors>
<Coefficients absoluteValue="-0.5" numberOfCoefficients="2"><Coefficient value="1"/><Coefficient value="-1"/></Coefficients></SupportVectorMachine>
</SupportVectorMachineModel></PMML>`,
			// f(x) = x1 - x2 - 0.5 = 0.5 is not below the threshold 0: the alternate category.
			in:   map[string]Value{"x1": FloatValue(2), "x2": FloatValue(1)},
			want: map[string]Value{"y": StringValue("no")},
		},
		{
			name: "naive bayes",
			doc: `<PMML version="4.4"><DataDictionary><DataField name="t" optype="categorical" dataType="string"><Value value="p"/><Value value="q"/></DataField>
<DataField name="c" optype="categorical" dataType="string"/><DataField name="x" optype="continuous" dataType="double"/></DataDictionary>
<NaiveBayesModel functionName="classification" threshold="0"><MiningSchema><MiningField name="t" usageType="target"/><MiningField name="c"/><MiningField name="x"/></MiningSchema>
<Output><OutputField name="pp" feature="probability" value="p"/></Output>
<BayesInputs><BayesInput fieldName="c"><PairCounts value="u"><TargetValueCounts><TargetValueCount value="p" count="20"/><TargetValueCount value="q" count="2"/></TargetValueCounts></PairCounts>
<PairCounts value="v"><TargetValueCounts><TargetValueCount value="p" count="10"/><TargetValueCount value="q" count="8"/></TargetValueCounts></PairCounts></BayesInput>
<BayesInput fieldName="x"><TargetValueStats><TargetValueStat value="p"><GaussianDistribution mean="0" variance="1"/></TargetValueStat><TargetValueStat value="q"><GaussianDistribution mean="2" variance="1"/></TargetValueStat></TargetValueStats></BayesInput></BayesInputs>
<BayesOutput fieldName="t"><TargetValueCounts><TargetValueCount value="p" count="30"/><TargetValueCount value="q" count="10"/></TargetValueCounts></BayesOutput>
</NaiveBayesModel></PMML>`,
			in:   map[string]Value{"c": StringValue("u"), "x": FloatValue(1)},
			want: map[string]Value{"t": StringValue("p"), "pp": FloatValue(nbP / (nbP + nbQ))},
		},
		{
			name: "rule set",
			doc: `<PMML version="4.4"><DataDictionary><DataField name="y" optype="categorical" dataType="string"><Value value="hi"/><Value value="mid"/><Value value="lo"/></DataField>
<DataField name="x" optype="continuous" dataType="double"/></DataDictionary>
<RuleSetModel functionName="classification"><MiningSchema><MiningField name="y" usageType="target"/><MiningField name="x"/></MiningSchema>
<Output><OutputField name="conf" feature="confidence"/><OutputField name="rule" feature="entityId"/></Output>
<RuleSet defaultScore="lo" defaultConfidence="0.3"><RuleSelectionMethod criterion="firstHit"/>
<SimpleRule id="r1" score="hi" confidence="0.9"><SimplePredicate field="x" operator="greaterThan" value="5"/></SimpleRule>
<SimpleRule id="r2" score="mid" confidence="0.6"><SimplePredicate field="x" operator="greaterThan" value="2"/></SimpleRule>
</RuleSet></RuleSetModel></PMML>`,
			in:   map[string]Value{"x": FloatValue(3)},
			want: map[string]Value{"y": StringValue("mid"), "conf": FloatValue(0.6), "rule": StringValue("r2")},
		},
		{
			name: "nearest neighbor",
			doc: `<PMML version="4.4"><DataDictionary><DataField name="y" optype="continuous" dataType="double"/><DataField name="x" optype="continuous" dataType="double"/></DataDictionary>
<NearestNeighborModel functionName="regression" numberOfNeighbors="2" continuousScoringMethod="average"><MiningSchema><MiningField name="y" usageType="target"/><MiningField name="x"/></MiningSchema>
<Output><OutputField name="n1" feature="entityId" rank="1"/><OutputField name="n2" feature="entityId" rank="2"/></Output>
<TrainingInstances><InstanceFields><InstanceField field="x" column="cx"/><InstanceField field="y" column="cy"/></InstanceFields>
<InlineTable><row><cx>0</cx><cy>0</cy></row><row><cx>1</cx><cy>10</cy></row><row><cx>2</cx><cy>20</cy></row><row><cx>10</cx><cy>100</cy></row></InlineTable></TrainingInstances>
<ComparisonMeasure kind="distance"><euclidean/></ComparisonMeasure><KNNInputs><KNNInput field="x"/></KNNInputs>
</NearestNeighborModel></PMML>`,
			// x=1.4: the nearest instances are the 2nd (0.4 away) and 3rd (0.6): (10+20)/2.
			in:   map[string]Value{"x": FloatValue(1.4)},
			want: map[string]Value{"y": FloatValue(15), "n1": FloatValue(2), "n2": FloatValue(3)},
		},
	}
	// The clustering model again without its Output: the cluster id is the
	// one output.
	noOut := cases[1]
	noOut.name = "clustering without output"
	noOut.doc = strings.Replace(noOut.doc, `<Output><OutputField name="id" feature="predictedValue"/><OutputField name="name" feature="predictedDisplayValue"/><OutputField name="dB" feature="affinity" value="B"/></Output>`, "", 1)
	noOut.want = map[string]Value{"predictedValue": StringValue("A")}
	cases = append(cases, noOut)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(strings.NewReader(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			res := scoreOne(t, m, record(t, m, tc.in))
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			for name, want := range tc.want {
				got := outVal(t, m, res, name)
				if got.K != want.K || got.S != want.S || math.Abs(got.F-want.F) > 1e-12*math.Max(1, math.Abs(want.F)) {
					t.Errorf("%s = %#v, want %#v", name, got, want)
				}
			}
		})
	}
}
