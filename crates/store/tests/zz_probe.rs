#![allow(missing_docs, clippy::unwrap_used, clippy::print_stdout)]
#[test]
fn probe() {
    let text = std::fs::read_to_string("/tmp/probe.txt").unwrap();
    for line in text.lines() {
        let (kind, l) = line.split_at(2);
        let l = l.replace("\\n", "\n");
        let got = memloop_store::SecretFilter::find(&l);
        let ok = (kind == "C ") == got.is_some();
        if !ok {
            println!("WRONG {kind}{l:?} -> {got:?}");
        }
    }
}
