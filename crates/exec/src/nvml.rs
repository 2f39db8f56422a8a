//! The NVML backend. libnvidia-ml is loaded at run time (nvml-wrapper uses
//! libloading), so the binary builds and runs on machines without it and
//! only `--devices nvml` fails there, with one sentence.

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, TopologyLevel};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{EventSet, Nvml};

use crate::device::{Devices, Gpu, Health};
use crate::ExecError;

pub struct NvmlDevices {
    nvml: &'static Nvml,
    host: String,
    /// Critical XID events; `None` where the driver does not support events.
    events: Option<EventSet<'static>>,
    /// UUIDs that reported a critical XID error, with the XID.
    xid: Vec<(String, u64)>,
}

// SAFETY-free: NVML handles are thread-safe per NVIDIA's docs; the wrapper
// marks EventSet !Send only because it holds a raw pointer.
unsafe impl Send for NvmlDevices {}

fn level_name(l: TopologyLevel) -> &'static str {
    match l {
        TopologyLevel::Internal => "internal",
        TopologyLevel::Single => "single-switch",
        TopologyLevel::Multiple => "multi-switch",
        TopologyLevel::HostBridge => "host-bridge",
        TopologyLevel::Node => "numa",
        TopologyLevel::System => "system",
    }
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for 256 bytes; gethostname NUL-terminates or truncates.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl NvmlDevices {
    pub fn open() -> Result<Self, ExecError> {
        let nvml = Nvml::init().map_err(|e| {
            ExecError::Devices(match e {
                NvmlError::LibloadingError(_) => "--devices nvml: libnvidia-ml.so could not be loaded (no NVIDIA driver on this machine); use --devices fake:NODESxGPUS to try gpuplan without GPUs".to_string(),
                e => format!("--devices nvml: NVML failed to initialise: {e}"),
            })
        })?;
        // The daemon keeps NVML for its whole life; leaking it gives the
        // event set the 'static lifetime it borrows.
        let nvml: &'static Nvml = Box::leak(Box::new(nvml));
        let mut events = nvml.create_event_set().ok();
        if let Ok(count) = nvml.device_count() {
            for i in 0..count {
                let (Ok(dev), Some(set)) = (nvml.device_by_index(i), events.take()) else {
                    continue;
                };
                events = dev.register_events(EventTypes::CRITICAL_XID_ERROR, set).ok();
            }
        }
        Ok(NvmlDevices {
            nvml,
            host: hostname(),
            events,
            xid: Vec::new(),
        })
    }

    fn drain_xid(&mut self) {
        let Some(set) = &self.events else { return };
        while let Ok(ev) = set.wait(0) {
            if let (Ok(uuid), Some(x)) = (ev.device.uuid(), ev.event_data) {
                let xid = match x {
                    nvml_wrapper::enums::event::XidError::Value(v) => v,
                    nvml_wrapper::enums::event::XidError::Unknown => 0,
                };
                self.xid.push((uuid, xid));
            }
        }
    }
}

impl Devices for NvmlDevices {
    fn backend(&self) -> &'static str {
        "nvml"
    }

    fn collect(&mut self) -> Result<Vec<Gpu>, ExecError> {
        self.drain_xid();
        let count = self
            .nvml
            .device_count()
            .map_err(|e| ExecError::Devices(format!("NVML device count: {e}")))?;
        let mut out = Vec::new();
        for i in 0..count {
            // A device that cannot be opened (GpuLost) simply leaves the round.
            let Ok(dev) = self.nvml.device_by_index(i) else {
                continue;
            };
            let Ok(uuid) = dev.uuid() else { continue };
            let mem = dev.memory_info().ok();
            let mut health = Health::Ok;
            if let Ok(n) = dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile) {
                if n > 0 {
                    health = Health::Unhealthy {
                        reason: format!("{n} uncorrectable ECC errors since boot"),
                    };
                }
            }
            if let Some((_, x)) = self.xid.iter().find(|(u, _)| *u == uuid) {
                health = Health::Unhealthy {
                    reason: format!("critical XID {x}"),
                };
            }
            out.push(Gpu {
                uuid,
                node: self.host.clone(),
                index: i,
                name: dev.name().unwrap_or_default(),
                memory_total_bytes: mem.as_ref().map_or(0, |m| m.total),
                memory_used_bytes: mem.as_ref().map_or(0, |m| m.used),
                utilization_pct: dev.utilization_rates().ok().map(|u| u.gpu),
                processes: dev
                    .running_compute_processes()
                    .map(|v| v.into_iter().map(|p| p.pid).collect())
                    .unwrap_or_default(),
                health,
                topology: Vec::new(),
            });
        }
        let idx: Vec<u32> = out.iter().map(|g| g.index).collect();
        for a in 0..out.len() {
            let Ok(da) = self.nvml.device_by_index(idx[a]) else {
                continue;
            };
            for b in 0..out.len() {
                if a == b {
                    continue;
                }
                let Ok(db) = self.nvml.device_by_index(idx[b]) else {
                    continue;
                };
                if let Ok(l) = da.topology_common_ancestor(db) {
                    let uuid = out[b].uuid.clone();
                    out[a].topology.push((uuid, level_name(l).to_string()));
                }
            }
        }
        Ok(out)
    }
}
