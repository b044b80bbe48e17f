//! What a visitor reads from the index page: a ballot (the hidden "win"
//! and "lose" fields of one of the two forms, see templates/contender.html)
//! and the packs of the two stickers shown.

pub struct Ballot {
    pub win: String,
    pub lose: String,
}

/// The values of every `name="NAME" value="..."` field, in page order.
fn fields<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let marker = format!("name=\"{}\" value=\"", name);
    values(html, &marker)
}

fn values<'a>(html: &'a str, marker: &str) -> Vec<&'a str> {
    let mut found = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(marker) {
        rest = &rest[at + marker.len()..];
        match rest.find('"') {
            Some(end) => found.push(&rest[..end]),
            None => break,
        }
    }
    found
}

/// The ballot of form `pick` (0 or 1) of an index page, or None.
pub fn ballot(html: &str, pick: usize) -> Option<Ballot> {
    let wins = fields(html, "win");
    let loses = fields(html, "lose");
    if wins.len() != 2 || loses.len() != 2 {
        return None;
    }
    let token = |t: &str| t.len() == 22 && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let (win, lose) = (wins[pick % 2], loses[pick % 2]);
    if !token(win) || !token(lose) {
        return None;
    }
    Some(Ballot { win: win.to_string(), lose: lose.to_string() })
}

/// The path of a pack linked from an index page (`/packs/NAME`), or None.
pub fn pack(html: &str, pick: usize) -> Option<String> {
    let packs: Vec<&str> = values(html, "href=\"/packs/")
        .into_iter()
        .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        .collect();
    if packs.is_empty() {
        return None;
    }
    Some(format!("/packs/{}", packs[pick % packs.len()]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<form class="contender" method="post" action="/">
    <input type="hidden" name="win" value="AAAAAAAAAAAAAAAAAAAAAA">
    <input type="hidden" name="lose" value="BBBBBBBBBBBBBBBBBBBBBB">
    <a href="/packs/cats">Cats</a></form>
    <form><input type="hidden" name="win" value="CCCCCCCCCCCCCCCCCCCCCC">
    <input type="hidden" name="lose" value="DDDDDDDDDDDDDDDDDDDDDD">
    <a href="/packs/dogs">Dogs</a></form>"#;

    #[test]
    fn reads_either_ballot_and_pack() {
        let b = ballot(PAGE, 1).unwrap();
        assert_eq!((b.win.as_str(), b.lose.as_str()), ("CCCCCCCCCCCCCCCCCCCCCC", "DDDDDDDDDDDDDDDDDDDDDD"));
        assert_eq!(pack(PAGE, 0).unwrap(), "/packs/cats");
        assert!(ballot("<p>no form</p>", 0).is_none());
    }
}
