//! A command line as one string that a POSIX shell reads back as the same argv: how a
//! session's command is shown and written into recordings.

/// Bytes an argument may hold and still go unquoted.
fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c)
}

/// Quotes one argument shell-style: plain words as they are, anything else in single
/// quotes (a `'` inside becomes `'\''`), the empty string as `''`.
pub fn quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(is_plain) {
        return arg.to_string();
    }
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// Joins `argv` into one shell-quoted command line.
pub fn join<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter().map(|a| quote(a.as_ref())).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a line back the way a POSIX shell splits words (only the quoting `join`
    /// produces: bare words, single quotes, and backslash-escaped characters).
    fn split(line: &str) -> Vec<String> {
        let (mut out, mut cur, mut in_word, mut quoted) = (Vec::new(), String::new(), false, false);
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\'' if !quoted => (quoted, in_word) = (true, true),
                '\'' => quoted = false,
                '\\' if !quoted => cur.extend(chars.next()),
                ' ' if !quoted => {
                    if in_word {
                        out.push(std::mem::take(&mut cur));
                    }
                    in_word = false;
                }
                c => (cur.push(c), in_word = true).1,
            }
        }
        if in_word {
            out.push(cur);
        }
        out
    }

    #[test]
    fn plain_words_stay_bare() {
        assert_eq!(join(&["htop", "-d", "10", "./a.out", "a=b,c:d@e%f+g"]), "htop -d 10 ./a.out a=b,c:d@e%f+g");
    }

    #[test]
    fn everything_else_reads_back_as_the_same_argv() {
        let cases: Vec<Vec<&str>> = vec![
            vec!["bash", "-c", "echo \"hi there\"; ls *"],
            vec!["printf", "%s\n", "it's", ""],
            vec!["a b", "'", "''", "\\", "$HOME", "`x`", "tab\there", "new\nline", "é"],
        ];
        for argv in cases {
            let line = join(&argv);
            assert_eq!(split(&line), argv, "{line}");
        }
        assert_eq!(join(&["it's"]), r"'it'\''s'");
        assert_eq!(join(&[""]), "''");
    }
}
