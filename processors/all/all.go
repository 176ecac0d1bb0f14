// Package all registers every processor; the binary imports it for effect.
package all

import (
	_ "github.com/eas-server/eas-server/processors/caffe"        // caffe_cpu, caffe_gpu
	_ "github.com/eas-server/eas-server/processors/custom"       // processor_path with processor_type cpp or python
	_ "github.com/eas-server/eas-server/processors/easycv"       // easycv
	_ "github.com/eas-server/eas-server/processors/easynlp"      // easynlp
	_ "github.com/eas-server/eas-server/processors/easytransfer" // easytransfer_cpu, easytransfer_gpu
	_ "github.com/eas-server/eas-server/processors/echo"         // echo
	_ "github.com/eas-server/eas-server/processors/llm"          // llm_cpu, llm_gpu
	_ "github.com/eas-server/eas-server/processors/onnx"         // pytorch_*, onnx_*
	_ "github.com/eas-server/eas-server/processors/pmml"         // pmml
	_ "github.com/eas-server/eas-server/processors/tensorflow"   // tensorflow_cpu_*, tensorflow_gpu_*
	_ "github.com/eas-server/eas-server/processors/textencoder"  // text_encoder (ours)
	_ "github.com/eas-server/eas-server/processors/treeensemble" // parameter_server, parameter_sever, xgboost
	_ "github.com/eas-server/eas-server/processors/triton"       // triton
)
