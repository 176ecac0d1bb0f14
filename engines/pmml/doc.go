// Package pmml is a PMML 3.x-4.4 evaluator: it parses a document once with
// encoding/xml into a compiled form and scores records against it.
//
// Compilation resolves every field name to a slot index and every predicate
// and expression to a typed node, so scoring does no map lookups by name;
// trees whose predicates are numeric comparisons also get a flat layout that
// keeps their nodes contiguous in memory. A construct the evaluator does not
// implement is a load-time *LoadError naming the element and its line
// (errors.Is(err, ErrUnsupported)), never a wrong score.
//
// Supported: DataDictionary (valid, invalid and missing values, intervals),
// MiningSchema treatments (missingValueReplacement, invalidValueTreatment,
// outliers), TransformationDictionary and LocalTransformations (Constant,
// FieldRef, NormContinuous, NormDiscrete, Discretize, MapValues, TextIndex,
// Apply with the built-in functions and DefineFunction), Targets, and the
// models RegressionModel, GeneralRegressionModel, TreeModel, MiningModel,
// NeuralNetwork, Scorecard, SupportVectorMachineModel, NaiveBayesModel,
// ClusteringModel, NearestNeighborModel, RuleSetModel and (PMML 4.4)
// AnomalyDetectionModel, with OutputField
// features predictedValue, predictedDisplayValue, probability, confidence,
// transformedValue, decision, reasonCode, entityId, clusterId, affinity and
// ruleValue. CONFORMANCE.md at the repository root reports the results on
// the shared conformance corpus.
//
// Usage:
//
//	m, err := pmml.ParseFile("model.pmml")      // or Parse(r, pmml.Options{...})
//	rec := m.NewRecord()                         // aligned with m.Inputs()
//	rec.Values[m.InputIndex("age")] = pmml.FloatValue(42)
//	out := []pmml.Result{m.NewResult()}          // aligned with m.Outputs()
//	err = m.Score([]pmml.Record{rec}, out)       // out[0].Err for per-record problems
//
// A Model is immutable and safe for concurrent use. Score allocates nothing
// per record once the results come from NewResult (TextIndex models and
// string-producing functions excepted); evaluation scratch space comes from
// a sync.Pool. Inputs are converted to the DataField's type: numbers may
// arrive as numeric strings, and a value that does not convert is invalid.
//
// Semantics worth knowing:
//   - Missing inputs follow the model (missingValueReplacement, tree
//     missingValueStrategy, ...). Options.MissingValueDefaults fills a
//     missing input with false, 0 or "" the way EAS does, but only where the
//     MiningField declares no missingValueReplacement or missingValueTreatment
//     (and not with a value the DataField lists as invalid: a categorical
//     field with listed values is not filled with "").
//   - invalidValueTreatment defaults to returnInvalid: the record gets a
//     *RecordError in Result.Err and missing values.
//   - modelChain and selectFirst mining models expose their segments'
//     OutputFields (isFinalResult="false" ones are usable but not reported).
//     selectAll reports the last selected segment's prediction.
//   - x-mathContext="float" (XGBoost via JPMML) rounds tree thresholds, sums
//     and the logit to single precision as XGBoost does.
package pmml
