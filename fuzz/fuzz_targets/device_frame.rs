//! The device and shim links' decoders on arbitrary bytes: binary frames
//! (`DeviceBinary::decode`, `ShimFrame::decode_from_shim` / `decode_from_device`), the
//! length-prefixed framing (`read_frame`), and every JSON control message of the device,
//! shim and viewer links. Each input goes to all of them: a decoder answers a value or an
//! error, never panics, and whatever decodes survives its own encoding.

#![no_main]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use drover_protocol::device::{DeviceBinary, DeviceMessage, MergeResult, ServerMessage, Worktree};
use drover_protocol::frame::{read_frame, MAX_FRAME_LEN};
use drover_protocol::shim::{SessionSpec, ShimEvent, ShimExit, ShimFrame, ShimRequest};
use drover_protocol::viewer::{ViewerCommand, ViewerEvent};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Parses `data` as `T`; whatever parses must come back the same from its own JSON.
fn json_round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok(v) = serde_json::from_slice::<T>(data) {
        let text = serde_json::to_vec(&v).expect("a parsed message serialises");
        let back: T = serde_json::from_slice(&text).expect("a message's own JSON parses");
        assert_eq!(back, v, "JSON round trip of {}", std::any::type_name::<T>());
    }
}

/// Polls a future that never waits (reading from a slice) to its end.
fn now<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("reading from a slice never waits"),
    }
}

fuzz_target!(|data: &[u8]| {
    // Device link, binary frames: the encoding is exactly the bytes decoded.
    if let Ok(frame) = DeviceBinary::decode(data) {
        assert_eq!(frame.encode(), data);
    }

    // Shim link, frames the device reads from the shim.
    if let Ok(frame) = ShimFrame::decode_from_shim(data) {
        match &frame {
            ShimFrame::Output { .. } | ShimFrame::Snapshot(_) => assert_eq!(frame.encode(), data),
            _ => assert_eq!(ShimFrame::decode_from_shim(&frame.encode()).expect("own encoding decodes"), frame),
        }
    }
    // Shim link, frames the shim reads from the device.
    if let Ok(frame) = ShimFrame::decode_from_device(data) {
        match &frame {
            ShimFrame::Input(_) => assert_eq!(frame.encode(), data),
            _ => assert_eq!(ShimFrame::decode_from_device(&frame.encode()).expect("own encoding decodes"), frame),
        }
    }

    // The shim socket's length-prefixed framing.
    let mut reader = data;
    if let Ok(Some(payload)) = now(read_frame(&mut reader)) {
        assert!(payload.len() <= MAX_FRAME_LEN);
        assert_eq!(&data[4..4 + payload.len()], &payload[..]);
    }

    // JSON text messages (device link text frames, shim control frames, viewer link, spec.json / exit.json).
    json_round_trip::<DeviceMessage>(data);
    json_round_trip::<ServerMessage>(data);
    json_round_trip::<MergeResult>(data);
    json_round_trip::<Worktree>(data);
    json_round_trip::<ShimRequest>(data);
    json_round_trip::<ShimEvent>(data);
    json_round_trip::<ShimExit>(data);
    json_round_trip::<SessionSpec>(data);
    json_round_trip::<ViewerCommand>(data);
    json_round_trip::<ViewerEvent>(data);
});
