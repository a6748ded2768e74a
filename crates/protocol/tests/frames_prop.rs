//! Property tests of the framing every hostile or broken peer reaches first: any bytes
//! given to a decoder give a frame or an error, never a panic, and every frame survives
//! its own encoding. They run in the default test command.

use drover_core::SessionId;
use drover_protocol::device::{DeviceBinary, DeviceMessage, ServerMessage};
use drover_protocol::shim::{ShimFrame, Snapshot};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn device_frames_decode_or_refuse_any_bytes(buf in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = DeviceBinary::decode(&buf);
    }

    #[test]
    fn shim_frames_decode_or_refuse_any_bytes(buf in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = ShimFrame::decode_from_shim(&buf);
        let _ = ShimFrame::decode_from_device(&buf);
    }

    #[test]
    fn json_messages_parse_or_refuse_any_text(text in ".{0,200}") {
        let _ = serde_json::from_str::<DeviceMessage>(&text);
        let _ = serde_json::from_str::<ServerMessage>(&text);
    }

    #[test]
    fn json_messages_with_a_known_type_and_a_junk_session_are_refused(
        kind in prop::sample::select(vec!["started", "ended", "delivered", "failed", "commit", "usage", "resized", "recording_error"]),
        junk in ".{0,40}",
    ) {
        let text = format!(r#"{{"type":"{kind}","session":{junk:?},"offset":1,"end":{{"kind":"exited"}}}}"#);
        prop_assert!(serde_json::from_str::<DeviceMessage>(&text).is_err(), "{} was accepted", text);
    }

    #[test]
    fn device_frames_round_trip(uuid in any::<u128>(), offset in any::<u64>(), t in any::<u64>(), data in proptest::collection::vec(any::<u8>(), 0..256)) {
        let session = SessionId::from_uuid(uuid::Uuid::from_u128(uuid));
        for frame in [
            DeviceBinary::Output { session, offset, t_micros: t, data: data.clone().into() },
            DeviceBinary::Input { session, data: data.clone() },
            DeviceBinary::Snapshot { session, snapshot: Snapshot { req: t, offset, cols: 80, rows: 24, data: data.clone() } },
        ] {
            prop_assert_eq!(DeviceBinary::decode(&frame.encode()).unwrap(), frame);
        }
    }

    #[test]
    fn shim_output_frames_round_trip(offset in any::<u64>(), t in any::<u64>(), data in proptest::collection::vec(any::<u8>(), 0..256)) {
        let frame = ShimFrame::Output { offset, t_micros: t, data: data.into() };
        prop_assert_eq!(ShimFrame::decode_from_shim(&frame.encode()).unwrap(), frame);
    }
}
