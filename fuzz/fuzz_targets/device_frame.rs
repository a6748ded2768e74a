//! The device and shim links' decoders on arbitrary bytes: binary frames
//! (`DeviceBinary::decode`, `ShimFrame::decode_from_shim` / `decode_from_device`), the
//! length-prefixed framing (`read_frame`), and every JSON control message of the device,
//! shim and viewer links. Each input goes to all of them: a decoder answers a value or an
//! error, never panics, and whatever decodes survives its own encoding. The same bytes,
//! read as a sequence of messages from two devices, drive each link's gate
//! (`drover_core::device_link::LinkGuard`): no message for the other device's session
//! is ever taken, the link closes on the second such message, and no output is taken
//! past the allowed gap or past what its session can have printed.

#![no_main]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use drover_core::device_link::{possible_output, LinkGuard, Owner, Verdict, MAX_OUTPUT_GAP};
use drover_core::SessionId;
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

/// `data` as messages from two devices, each owning two of four sessions; the gates'
/// answers must keep the link's rules whatever the order and values.
fn two_devices(data: &[u8]) {
    let sessions: [SessionId; 4] = std::array::from_fn(|_| SessionId::new());
    let owner = |s: usize| s % 2;
    let mut gates = [LinkGuard::new(), LinkGuard::new()];
    let mut next = [[0u64; 4]; 2];
    let mut offences = [0u32; 2];
    let mut closed = [false; 2];
    let mut now = 0u64;
    for op in data.chunks(10) {
        if op.len() < 10 {
            break;
        }
        let device = (op[0] & 1) as usize;
        let s = (op[0] >> 1) as usize % 4;
        if closed[device] {
            continue;
        }
        now += u64::from(op[1]) * 1000;
        let offset = u64::from_le_bytes(op[2..10].try_into().unwrap()) >> (op[1] % 64);
        let len = u64::from(op[1]);
        let gate = &mut gates[device];
        let verdict = if op[0] & 0x80 != 0 { gate.check(sessions[s]) } else { gate.check_output(sessions[s], offset, len, now) };
        let verdict = if verdict == Verdict::LookUp {
            let o = if owner(s) == device { Owner::This { stored: 0, age_micros: 0 } } else { Owner::Other };
            gate.learn(sessions[s], o, now);
            if op[0] & 0x80 != 0 {
                gate.check(sessions[s])
            } else {
                gate.check_output(sessions[s], offset, len, now)
            }
        } else {
            verdict
        };
        if owner(s) != device {
            offences[device] += 1;
            assert_ne!(verdict, Verdict::Take, "a message for another device's session was taken");
            if offences[device] >= 2 {
                assert!(matches!(verdict, Verdict::Close(_)), "a second offence must close the link");
            }
        } else if verdict == Verdict::Take && op[0] & 0x80 == 0 {
            let seen = &mut next[device][s];
            assert!(offset <= seen.saturating_add(MAX_OUTPUT_GAP), "output taken past the allowed gap");
            let end = offset.checked_add(len).expect("an overflowing range was taken");
            assert!(end <= possible_output(now), "output taken past what the session can have printed");
            *seen = (*seen).max(end);
        }
        if matches!(verdict, Verdict::Close(_)) {
            closed[device] = true;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    two_devices(data);

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
