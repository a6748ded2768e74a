//! Rules for names people choose (device names, titles) and terminal sizes.

/// Smallest and largest terminal sizes a session accepts.
pub const MIN_COLS: u16 = 2;
/// Largest terminal width accepted.
pub const MAX_COLS: u16 = 1000;
/// Smallest terminal height accepted.
pub const MIN_ROWS: u16 = 1;
/// Largest terminal height accepted.
pub const MAX_ROWS: u16 = 500;
/// Longest title accepted, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// A name or size that is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Device names are 1–63 characters of letters, digits, `-`, `_`, `.`.
    #[error("device name `{0}` is not valid: use 1–63 letters, digits, '-', '_' or '.', starting with a letter or digit")]
    DeviceName(String),
    /// Member names are 1–63 characters of letters, digits, `-`, `_`, `.`.
    #[error("member name `{0}` is not valid: use 1–63 letters, digits, '-', '_' or '.', starting with a letter or digit")]
    MemberName(String),
    /// A password too short or too long.
    #[error("the password must be {MIN_PASSWORD_CHARS}–{MAX_PASSWORD_BYTES} characters long")]
    Password,
    /// A title with control characters or too long.
    #[error("title is not valid: at most {MAX_TITLE_CHARS} characters, no control characters")]
    Title,
    /// A terminal size outside the accepted range.
    #[error("terminal size {cols}x{rows} is out of range: columns {MIN_COLS}–{MAX_COLS}, rows {MIN_ROWS}–{MAX_ROWS}")]
    Size {
        /// Columns given.
        cols: u32,
        /// Rows given.
        rows: u32,
    },
}

/// Shortest password accepted, in characters.
pub const MIN_PASSWORD_CHARS: usize = 10;
/// Longest password accepted, in bytes (hashing cost stays bounded).
pub const MAX_PASSWORD_BYTES: usize = 256;

/// Whether `name` is 1–63 letters, digits, `-`, `_`, `.`, starting with a letter or digit.
fn is_handle(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Checks a device name.
pub fn check_device_name(name: &str) -> Result<(), NameError> {
    if is_handle(name) {
        Ok(())
    } else {
        Err(NameError::DeviceName(name.chars().take(80).collect()))
    }
}

/// Checks a member's name (what they sign in with).
pub fn check_member_name(name: &str) -> Result<(), NameError> {
    if is_handle(name) {
        Ok(())
    } else {
        Err(NameError::MemberName(name.chars().take(80).collect()))
    }
}

/// Checks a new password's length.
pub fn check_password(password: &str) -> Result<(), NameError> {
    if password.chars().count() >= MIN_PASSWORD_CHARS && password.len() <= MAX_PASSWORD_BYTES {
        Ok(())
    } else {
        Err(NameError::Password)
    }
}

/// Checks a session or sandbox title.
pub fn check_title(title: &str) -> Result<(), NameError> {
    if title.chars().count() > MAX_TITLE_CHARS || title.chars().any(char::is_control) {
        return Err(NameError::Title);
    }
    Ok(())
}

/// Checks a terminal size.
pub fn check_size(cols: u32, rows: u32) -> Result<(u16, u16), NameError> {
    let ok = (MIN_COLS as u32..=MAX_COLS as u32).contains(&cols) && (MIN_ROWS as u32..=MAX_ROWS as u32).contains(&rows);
    if ok {
        Ok((cols as u16, rows as u16))
    } else {
        Err(NameError::Size { cols, rows })
    }
}

/// Turns a host name into a valid device name (invalid characters become '-').
pub fn device_name_from_host(host: &str) -> String {
    let mut s: String =
        host.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' }).take(63).collect();
    if !s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) {
        s.insert(0, 'd');
        s.truncate(63);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names() {
        for good in ["laptop", "build-01", "a", "x.y_z"] {
            assert!(check_device_name(good).is_ok(), "{good}");
        }
        for bad in ["", "-x", "has space", "ünï", &"a".repeat(64), "a/b"] {
            assert!(check_device_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn member_names_and_passwords() {
        assert!(check_member_name("alice").is_ok());
        assert_eq!(check_member_name("<b>x</b>"), Err(NameError::MemberName("<b>x</b>".into())));
        assert!(check_password("correct horse").is_ok());
        assert_eq!(check_password("short"), Err(NameError::Password));
        assert_eq!(check_password(&"é".repeat(200)), Err(NameError::Password), "too many bytes");
    }

    #[test]
    fn host_names_become_valid_device_names() {
        for host in ["my host", "-weird", "ok", "ünicode", ""] {
            let name = device_name_from_host(host);
            assert!(check_device_name(&name).is_ok(), "{host} -> {name}");
        }
    }

    #[test]
    fn titles() {
        assert!(check_title("fix the login bug").is_ok());
        assert!(check_title("").is_ok());
        assert!(check_title("a\u{1b}[31m").is_err());
        assert!(check_title(&"x".repeat(MAX_TITLE_CHARS + 1)).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(check_size(80, 24), Ok((80, 24)));
        assert!(check_size(0, 24).is_err());
        assert!(check_size(80, 0).is_err());
        assert!(check_size(100_000, 24).is_err());
        assert!(check_size(80, 501).is_err());
    }
}
