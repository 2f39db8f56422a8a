//! The subset of onnx.proto we read, declared by hand for prost (field
//! numbers from onnx/onnx.proto, IR version 9; unknown fields are skipped by
//! the decoder, so full models decode), and the graph walk that counts
//! FLOPs, parameters and layers.
//!
//! Conventions:
//! - FLOPs = 2 × multiply-accumulates of Conv/ConvTranspose, Gemm, MatMul
//!   and LSTM/GRU/RNN; bias adds, activations, norms and pooling are not
//!   counted (they are a few percent of a CNN's and move no decision).
//! - Per sample: the graph's FLOPs divided by its batch, the leading
//!   dimension of its first input (1 when symbolic).
//! - Parameters: elements of every initializer (ONNX keeps the weights
//!   there; shape constants are initializers too, and tiny).
//! - Shapes come from the graph's inputs, its `value_info` (ONNX shape
//!   inference writes it) and a small propagation for common ops; a layer
//!   whose input shape is unknown is listed in [`OnnxFeatures::uncounted`].

use std::collections::HashMap;

use gpuplan_core::predict::{LayerCounts, ModelFeatures};
use prost::Message;

/// ONNX `ModelProto`: a file's top-level message.
#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    /// ONNX IR version the file was written for.
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    /// The tool that wrote the file.
    #[prost(string, tag = "2")]
    pub producer_name: String,
    /// The computation graph; a model without one has no features.
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
}

/// ONNX `GraphProto`: the layers, weights and typed values.
#[derive(Clone, PartialEq, Message)]
pub struct GraphProto {
    /// The operators, in topological order.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    /// The graph's name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// The weights (and shape constants); parameters are counted here.
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    /// Graph inputs; the first one's leading dimension is the batch.
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    /// Graph outputs.
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    /// Shapes of intermediate values, where shape inference wrote them.
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

/// ONNX `NodeProto`: one operator application.
#[derive(Clone, PartialEq, Message)]
pub struct NodeProto {
    /// Names of the values it reads (data first, then weights).
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    /// Names of the values it writes.
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    /// The node's name, used in [`OnnxFeatures::uncounted`].
    #[prost(string, tag = "3")]
    pub name: String,
    /// The operator (`Conv`, `Gemm`, `MatMul`, ...).
    #[prost(string, tag = "4")]
    pub op_type: String,
    /// The operator's attributes (kernel shape, strides, `transB`, ...).
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
}

/// ONNX `AttributeProto`: one named operator attribute.
#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    /// The attribute's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Value of a FLOAT attribute.
    #[prost(float, tag = "2")]
    pub f: f32,
    /// Value of an INT attribute.
    #[prost(int64, tag = "3")]
    pub i: i64,
    /// Value of an INTS attribute.
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    /// AttributeType: 1 FLOAT, 2 INT, 7 INTS, ...
    #[prost(int32, tag = "20")]
    pub r#type: i32,
}

/// ONNX `TensorProto`, without its data: an initializer's shape and name.
#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    /// The tensor's shape; its product is the parameter count.
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    /// ONNX element type (1 FLOAT, ...).
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    /// Name by which nodes refer to it.
    #[prost(string, tag = "8")]
    pub name: String,
}

/// ONNX `ValueInfoProto`: a named value and its type.
#[derive(Clone, PartialEq, Message)]
pub struct ValueInfoProto {
    /// The value's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its type; only tensor types are read.
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// ONNX `TypeProto`, tensor case only.
#[derive(Clone, PartialEq, Message)]
pub struct TypeProto {
    /// The tensor type; absent for other kinds.
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TensorTypeProto>,
}

/// ONNX `TypeProto.Tensor`: element type and shape.
#[derive(Clone, PartialEq, Message)]
pub struct TensorTypeProto {
    /// ONNX element type (1 FLOAT, ...).
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    /// The shape, where known.
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// ONNX `TensorShapeProto`: a list of dimensions.
#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    /// The dimensions, outermost first.
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// ONNX `TensorShapeProto.Dimension`: a size, or a symbol.
#[derive(Clone, PartialEq, Message)]
pub struct Dimension {
    /// 0 with `dim_param` set: a symbolic dimension (a batch, usually).
    #[prost(int64, tag = "1")]
    pub dim_value: i64,
    /// The symbol's name (`batch`, `N`) when the size is symbolic.
    #[prost(string, tag = "2")]
    pub dim_param: String,
}

/// Serialise a model (tests and tools build small graphs in code).
pub fn encode(m: &ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}

/// Features read from one ONNX file.
#[derive(Debug, Clone, PartialEq)]
pub struct OnnxFeatures {
    /// The features, as the utilization predictor reads them.
    pub features: ModelFeatures,
    /// The batch the FLOPs were divided by.
    pub batch: u64,
    /// Layers whose FLOPs could not be counted (a shape was unknown), by node name or op.
    pub uncounted: Vec<String>,
}

/// Why a file gave no features; each names the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The bytes are not a protobuf `ModelProto`.
    #[error("{source_name}: not an ONNX ModelProto: {message}")]
    Decode {
        /// The file, as the caller named it.
        source_name: String,
        /// The decoder's message.
        message: String,
    },
    /// The model decodes but a field the features need is missing or unusable.
    #[error("{source_name}: {field}: {message}")]
    Field {
        /// The file, as the caller named it.
        source_name: String,
        /// The field, as a path (`graph`, `graph.node`).
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

type Shape = Vec<u64>;

fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

fn attr_i(n: &NodeProto, name: &str, default: i64) -> i64 {
    attr(n, name).map_or(default, |a| a.i)
}

fn attr_ints(n: &NodeProto, name: &str) -> Vec<i64> {
    attr(n, name).map(|a| a.ints.clone()).unwrap_or_default()
}

fn shape_of(v: &ValueInfoProto) -> Option<Shape> {
    let dims = &v.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref()?.dim;
    // A symbolic dimension (dim_value 0) counts as 1: it is the batch.
    Some(dims.iter().map(|d| d.dim_value.max(1) as u64).collect())
}

/// Output spatial size of a convolution or pooling window along one axis.
fn window_out(input: u64, k: u64, stride: u64, pad: u64, dilation: u64) -> u64 {
    let eff = dilation * (k.max(1) - 1) + 1;
    (input + pad).saturating_sub(eff) / stride.max(1) + 1
}

/// Spatial output shape of Conv/pooling `n` on `x` ([N, C, spatial...]) with kernel `k`.
fn spatial_out(n: &NodeProto, x: &Shape, k: &[u64]) -> Vec<u64> {
    let d = k.len();
    let strides = attr_ints(n, "strides");
    let dil = attr_ints(n, "dilations");
    let pads = attr_ints(n, "pads");
    (0..d)
        .map(|i| {
            let input = x.get(2 + i).copied().unwrap_or(1);
            let pad = pads.get(i).copied().unwrap_or(0) + pads.get(i + d).copied().unwrap_or(0);
            window_out(
                input,
                k[i],
                strides.get(i).copied().unwrap_or(1) as u64,
                pad.max(0) as u64,
                dil.get(i).copied().unwrap_or(1) as u64,
            )
        })
        .collect()
}

/// One node of the graph ([`features_from_onnx`]): its layer kind counted,
/// its multiply-accumulates added to `macs` (or its name to `uncounted`
/// where its inputs' shapes are unknown), and its output's shape, where
/// known, returned.
fn count_node(
    n: &NodeProto,
    shapes: &HashMap<&str, Shape>,
    weights: &HashMap<&str, Shape>,
    layers: &mut LayerCounts,
    macs: &mut f64,
    uncounted: &mut Vec<String>,
) -> Option<Shape> {
    let input = |k: usize| n.input.get(k).and_then(|name| shapes.get(name.as_str())).cloned();
    let label = || {
        if n.name.is_empty() {
            n.op_type.clone()
        } else {
            n.name.clone()
        }
    };
    let mut out: Option<Shape> = None;
    match n.op_type.as_str() {
        "Conv" | "ConvTranspose" => {
            layers.conv += 1;
            match (input(0), input(1)) {
                (Some(x), Some(w)) if w.len() >= 3 && x.len() == w.len() => {
                    let k = &w[2..];
                    let transpose = n.op_type == "ConvTranspose";
                    // Conv: W = [M, C/group, k...]; ConvTranspose: W = [C, M/group, k...].
                    let sp = if transpose {
                        x[2..].to_vec()
                    } else {
                        spatial_out(n, &x, k)
                    };
                    let per_out: u64 = w[1..].iter().product();
                    let positions: u64 = sp.iter().product();
                    let m = if transpose {
                        w[1] * attr_i(n, "group", 1).max(1) as u64
                    } else {
                        w[0]
                    };
                    *macs += (x[0] * m * positions * per_out) as f64;
                    let mut s = vec![x[0], m];
                    s.extend(sp);
                    out = Some(s);
                }
                _ => uncounted.push(label()),
            }
        }
        "Gemm" => {
            layers.matmul += 1;
            match (input(0), input(1)) {
                (Some(a), Some(b)) if a.len() == 2 && b.len() == 2 => {
                    let (m, k) = if attr_i(n, "transA", 0) != 0 {
                        (a[1], a[0])
                    } else {
                        (a[0], a[1])
                    };
                    let nn = if attr_i(n, "transB", 0) != 0 { b[0] } else { b[1] };
                    *macs += (m * k * nn) as f64;
                    out = Some(vec![m, nn]);
                }
                _ => uncounted.push(label()),
            }
        }
        "MatMul" => {
            layers.matmul += 1;
            match (input(0), input(1)) {
                (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => {
                    let a2 = if a.len() == 1 { vec![1, a[0]] } else { a.clone() };
                    let b2 = if b.len() == 1 { vec![b[0], 1] } else { b.clone() };
                    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
                    let nn = b2[b2.len() - 1];
                    let lead_a = &a2[..a2.len() - 2];
                    let lead_b = &b2[..b2.len() - 2];
                    let lead = if lead_a.len() >= lead_b.len() {
                        lead_a
                    } else {
                        lead_b
                    };
                    *macs += (lead.iter().product::<u64>() * m * k * nn) as f64;
                    let mut s = lead.to_vec();
                    s.extend([m, nn]);
                    out = Some(s);
                }
                _ => uncounted.push(label()),
            }
        }
        "LSTM" | "GRU" | "RNN" => {
            layers.recurrent += 1;
            // X = [T, N, I], W = [dirs, gates·H, I], R = [dirs, gates·H, H].
            match (input(0), input(1), input(2)) {
                (Some(x), Some(w), Some(r)) if x.len() == 3 && w.len() == 3 && r.len() == 3 => {
                    *macs += (x[0] * x[1] * w[0] * w[1] * (w[2] + r[2])) as f64;
                    let h = r[2];
                    out = Some(vec![x[0], w[0], x[1], h]);
                }
                _ => uncounted.push(label()),
            }
        }
        "BatchNormalization" | "LayerNormalization" | "InstanceNormalization" | "GroupNormalization" => {
            layers.norm += 1;
            out = input(0);
        }
        "Attention" | "MultiHeadAttention" => {
            layers.attention += 1;
            uncounted.push(label());
        }
        "MaxPool" | "AveragePool" | "LpPool" => {
            if let Some(x) = input(0) {
                let k: Vec<u64> = attr_ints(n, "kernel_shape")
                    .iter()
                    .map(|&v| v.max(1) as u64)
                    .collect();
                if !k.is_empty() && x.len() == k.len() + 2 {
                    let mut s = vec![x[0], x[1]];
                    s.extend(spatial_out(n, &x, &k));
                    out = Some(s);
                }
            }
        }
        "GlobalAveragePool" | "GlobalMaxPool" => {
            out = input(0).map(|x| {
                x.iter()
                    .enumerate()
                    .map(|(i, &d)| if i < 2 { d } else { 1 })
                    .collect()
            });
        }
        "Flatten" => {
            out = input(0).map(|x| {
                let axis = (attr_i(n, "axis", 1).max(0) as usize).min(x.len());
                vec![x[..axis].iter().product(), x[axis..].iter().product()]
            });
        }
        // Element-wise ops keep their first input's shape.
        "Relu" | "Sigmoid" | "Tanh" | "Gelu" | "Add" | "Sub" | "Mul" | "Div" | "Dropout" | "Softmax"
        | "LeakyRelu" | "Clip" | "Identity" | "Erf" => out = input(0),
        _ => {
            if n.input
                .iter()
                .any(|i| weights.get(i.as_str()).is_some_and(|w| w.len() >= 2))
            {
                layers.other += 1;
            }
        }
    }
    out
}

/// Read a ModelProto and count its features.
pub fn features_from_onnx(bytes: &[u8], source_name: &str) -> Result<OnnxFeatures, OnnxError> {
    let model = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode {
        source_name: source_name.to_string(),
        message: e.to_string(),
    })?;
    let field_err = |field: &str, message: &str| OnnxError::Field {
        source_name: source_name.to_string(),
        field: field.to_string(),
        message: message.to_string(),
    };
    let g = model
        .graph
        .as_ref()
        .ok_or_else(|| field_err("graph", "missing"))?;
    if g.node.is_empty() {
        return Err(field_err("graph.node", "no nodes"));
    }
    let mut shapes: HashMap<&str, Shape> = HashMap::new();
    let mut weights: HashMap<&str, Shape> = HashMap::new();
    let mut params = 0.0;
    for (i, t) in g.initializer.iter().enumerate() {
        if t.dims.iter().any(|&d| d < 0) {
            return Err(field_err(
                &format!("graph.initializer[{i}].dims"),
                "negative dimension",
            ));
        }
        let dims: Shape = t.dims.iter().map(|&d| d as u64).collect();
        params += dims.iter().product::<u64>() as f64;
        shapes.insert(&t.name, dims.clone());
        weights.insert(&t.name, dims);
    }
    for v in g.input.iter().chain(&g.value_info).chain(&g.output) {
        if let Some(s) = shape_of(v) {
            shapes.entry(&v.name).or_insert(s);
        }
    }
    let batch = g
        .input
        .iter()
        .find(|v| !weights.contains_key(v.name.as_str()))
        .and_then(shape_of)
        .and_then(|s| s.first().copied())
        .unwrap_or(1)
        .max(1);

    let mut macs = 0.0;
    let mut layers = LayerCounts::default();
    let mut uncounted = Vec::new();
    for n in &g.node {
        let out = count_node(n, &shapes, &weights, &mut layers, &mut macs, &mut uncounted);
        if let (Some(s), Some(name)) = (out, n.output.first()) {
            shapes.entry(name.as_str()).or_insert(s);
        }
    }
    Ok(OnnxFeatures {
        features: ModelFeatures {
            flops_per_sample: 2.0 * macs / batch as f64,
            params,
            layers,
        },
        batch,
        uncounted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(name: &str, dims: &[i64]) -> ValueInfoProto {
        ValueInfoProto {
            name: name.into(),
            r#type: Some(TypeProto {
                tensor_type: Some(TensorTypeProto {
                    elem_type: 1,
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| Dimension {
                                dim_value: d,
                                dim_param: if d == 0 { "N".into() } else { String::new() },
                            })
                            .collect(),
                    }),
                }),
            }),
        }
    }

    fn init(name: &str, dims: &[i64]) -> TensorProto {
        TensorProto {
            dims: dims.to_vec(),
            data_type: 1,
            name: name.into(),
        }
    }

    fn ints(name: &str, v: &[i64]) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            ints: v.to_vec(),
            r#type: 7,
            ..Default::default()
        }
    }

    fn int(name: &str, v: i64) -> AttributeProto {
        AttributeProto {
            name: name.into(),
            i: v,
            r#type: 2,
            ..Default::default()
        }
    }

    fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            name: String::new(),
            op_type: op.into(),
            attribute,
        }
    }

    fn model(nodes: Vec<NodeProto>, inits: Vec<TensorProto>, input: ValueInfoProto) -> Vec<u8> {
        encode(&ModelProto {
            ir_version: 9,
            producer_name: "gpuplan-test".into(),
            graph: Some(GraphProto {
                node: nodes,
                name: "g".into(),
                initializer: inits,
                input: vec![input],
                output: vec![],
                value_info: vec![],
            }),
        })
    }

    #[test]
    fn a_gemm_layer_by_hand() {
        // y = x·Wᵀ + b, x [1, 784], W [10, 784]: 784·10 MACs, 7,840 + 10 parameters.
        let bytes = model(
            vec![node("Gemm", &["x", "W", "b"], "y", vec![int("transB", 1)])],
            vec![init("W", &[10, 784]), init("b", &[10])],
            value("x", &[1, 784]),
        );
        let f = features_from_onnx(&bytes, "gemm.onnx").unwrap();
        assert_eq!(f.features.params, 7850.0);
        assert_eq!(f.features.flops_per_sample, 2.0 * 784.0 * 10.0);
        assert_eq!(f.features.layers.matmul, 1);
        assert!(f.uncounted.is_empty());
    }

    #[test]
    fn a_conv_layer_by_hand_per_sample() {
        // x [8, 3, 32, 32], W [16, 3, 3, 3], pads 1, stride 2: output 16×16,
        // each output 27 MACs: 16·16·16·27 = 110,592 MACs per sample.
        let bytes = model(
            vec![node(
                "Conv",
                &["x", "W", "B"],
                "y",
                vec![
                    ints("pads", &[1, 1, 1, 1]),
                    ints("strides", &[2, 2]),
                    ints("kernel_shape", &[3, 3]),
                ],
            )],
            vec![init("W", &[16, 3, 3, 3]), init("B", &[16])],
            value("x", &[8, 3, 32, 32]),
        );
        let f = features_from_onnx(&bytes, "conv.onnx").unwrap();
        assert_eq!(f.batch, 8);
        assert_eq!(f.features.params, (16 * 27 + 16) as f64);
        assert_eq!(f.features.flops_per_sample, 2.0 * 110_592.0);
        assert_eq!(f.features.layers.conv, 1);
    }

    #[test]
    fn a_two_layer_mlp_by_hand_with_a_symbolic_batch() {
        // 784 → 128 (MatMul + Add + Relu) → 10 (MatMul + Add), batch symbolic.
        let bytes = model(
            vec![
                node("MatMul", &["x", "W1"], "h0", vec![]),
                node("Add", &["h0", "b1"], "h1", vec![]),
                node("Relu", &["h1"], "h2", vec![]),
                node("MatMul", &["h2", "W2"], "o0", vec![]),
                node("Add", &["o0", "b2"], "y", vec![]),
            ],
            vec![
                init("W1", &[784, 128]),
                init("b1", &[128]),
                init("W2", &[128, 10]),
                init("b2", &[10]),
            ],
            value("x", &[0, 784]),
        );
        let f = features_from_onnx(&bytes, "mlp.onnx").unwrap();
        assert_eq!(f.batch, 1);
        assert_eq!(f.features.params, (784 * 128 + 128 + 128 * 10 + 10) as f64);
        assert_eq!(f.features.flops_per_sample, 2.0 * (784.0 * 128.0 + 128.0 * 10.0));
        assert_eq!(f.features.layers.matmul, 2);
    }

    #[test]
    fn conv_pool_flatten_gemm_propagates_shapes() {
        // Conv 1→4 ch 3×3 valid on 10×10 → 8×8; MaxPool 2 → 4×4; Flatten → 64; Gemm → 5.
        let bytes = model(
            vec![
                node("Conv", &["x", "W"], "c", vec![]),
                node(
                    "MaxPool",
                    &["c"],
                    "p",
                    vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
                ),
                node("Flatten", &["p"], "f", vec![]),
                node("Gemm", &["f", "Wf"], "y", vec![int("transB", 1)]),
            ],
            vec![init("W", &[4, 1, 3, 3]), init("Wf", &[5, 64])],
            value("x", &[1, 1, 10, 10]),
        );
        let f = features_from_onnx(&bytes, "cnn.onnx").unwrap();
        assert_eq!(f.features.flops_per_sample, 2.0 * (4.0 * 64.0 * 9.0 + 64.0 * 5.0));
        assert!(f.uncounted.is_empty());
    }

    #[test]
    fn bad_input_names_the_file_and_field() {
        let e = features_from_onnx(&[0xff, 0xff, 0xff], "junk.onnx").unwrap_err();
        assert!(
            e.to_string().starts_with("junk.onnx: not an ONNX ModelProto"),
            "{e}"
        );
        let no_nodes = encode(&ModelProto {
            graph: Some(GraphProto::default()),
            ..Default::default()
        });
        let e = features_from_onnx(&no_nodes, "empty.onnx").unwrap_err();
        assert_eq!(e.to_string(), "empty.onnx: graph.node: no nodes");
        // A layer whose input shape is unknown is listed, not guessed.
        let bytes = model(
            vec![node("Gemm", &["z", "W"], "y", vec![])],
            vec![init("W", &[4, 4])],
            value("x", &[1, 4]),
        );
        assert_eq!(
            features_from_onnx(&bytes, "m.onnx").unwrap().uncounted,
            vec!["Gemm".to_string()]
        );
    }
}
