#![warn(missing_docs)]

//! Model features from an ONNX file, for predicting a job's GPU utilization
//! before it runs (issue 15; the regression itself is
//! `gpuplan_core::predict`, which needs no I/O and no protobuf).
//!
//! Why its own crate: decoding protobuf (prost) is the only thing here that
//! core must not carry, and only the binary needs it.
//!
//! Main items: [`features_from_onnx`] (bytes + a source name for errors),
//! [`OnnxFeatures`] (the features and what could not be counted),
//! [`OnnxError`] (what a file lacks, naming it), and the hand-declared
//! message subset rooted at [`ModelProto`], with [`encode`] to write one
//! (tests build small graphs in code).
//!
//! ```
//! // An empty file decodes to an empty ModelProto: an error naming the file and field.
//! let err = gpuplan_predict::features_from_onnx(&[], "model.onnx").unwrap_err();
//! assert_eq!(err.to_string(), "model.onnx: graph: missing");
//! ```

mod onnx;

pub use onnx::{
    encode, features_from_onnx, AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OnnxError,
    OnnxFeatures, TensorProto, TensorShapeProto, TensorTypeProto, TypeProto, ValueInfoProto,
};
