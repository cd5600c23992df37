//! Tests of the events: numbering, holding, delivering, bells.

use super::*;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("home")).unwrap();
    (dir, store)
}

fn take(store: &Store, session: &str, kinds: &[EventKind], holder: &str) -> Option<u64> {
    store.events().take(session, kinds, holder, |_| true).unwrap().map(|e| e.seq.unwrap())
}

#[test]
fn events_are_numbered_and_taken_once_in_order() {
    let (_dir, store) = store();
    for (kind, session) in [(EventKind::TaskFinished, "a"), (EventKind::Question, "a"), (EventKind::TaskFinished, "b")]
    {
        store.events().append(Event::new(kind, session)).unwrap();
    }
    assert_eq!(take(&store, "a", &[EventKind::Question], "h"), Some(2));
    assert_eq!(take(&store, "a", &[EventKind::Question], "h"), None);
    assert_eq!(take(&store, "a", &[], "h"), Some(1));
    assert_eq!(take(&store, "a", &[], "h"), None);
    assert_eq!(take(&store, "b", &[EventKind::TaskFinished, EventKind::Message], "h"), Some(3));
}

#[test]
fn what_a_holder_holds_is_delivered_once_confirmed_and_waits_again_once_released_or_dead() {
    let (_dir, store) = store();
    let log = store.events();
    for _ in 0..3 {
        log.append(Event::new(EventKind::Message, "s")).unwrap();
    }
    assert_eq!(take(&store, "s", &[], "one"), Some(1));
    assert_eq!(take(&store, "s", &[], "two"), Some(2));
    assert_eq!(log.confirm("one", None).unwrap(), 1);
    assert_eq!(log.release("two", None).unwrap(), 1);
    // Released: the next waiter gets 2 before 3; confirmed: 1 never again.
    assert_eq!(take(&store, "s", &[], "three"), Some(2));
    // Held by a live holder: left alone; by one found dead: taken over, oldest first.
    assert_eq!(take(&store, "s", &[], "four"), Some(3));
    let all_but_three_alive = |h: &str| h != "three";
    assert_eq!(log.take("s", &[], "five", all_but_three_alive).unwrap().and_then(|e| e.seq), Some(2));
    assert_eq!(take(&store, "s", &[], "six"), None);
    let delivered: Vec<bool> = log.read(Some("s"), 0, 10).unwrap().iter().map(|l| l.delivered).collect();
    assert_eq!(delivered, [true, false, false]);
    assert_eq!(log.confirm("five", Some(2)).unwrap(), 1);
    assert_eq!(log.confirm("three", Some(2)).unwrap(), 0, "only the holder confirms");
}

#[test]
fn concurrent_appenders_and_takers_deliver_every_event_exactly_once() {
    let (_dir, store) = store();
    let taken: Vec<u64> = std::thread::scope(|s| {
        for _ in 0..4 {
            let store = store.detached();
            s.spawn(move || {
                for _ in 0..10 {
                    store.events().append(Event::new(EventKind::TaskFinished, "s")).unwrap();
                }
            });
        }
        let takers: Vec<_> = (0..4)
            .map(|i| {
                let store = store.detached();
                s.spawn(move || {
                    let mut got = Vec::new();
                    let mut idle = 0;
                    while idle < 200 {
                        match take(&store, "s", &[], &format!("taker{i}")) {
                            Some(seq) => got.push(seq),
                            None => idle += 1,
                        }
                    }
                    got
                })
            })
            .collect();
        takers.into_iter().flat_map(|t| t.join().unwrap()).collect()
    });
    let mut all = taken.clone();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), taken.len(), "an event was taken twice");
    // Whatever the takers missed at the end is still waiting, never lost.
    while let Some(seq) = take(&store, "s", &[], "last") {
        all.push(seq);
    }
    all.sort();
    assert_eq!(all, (1..=40).collect::<Vec<_>>());
}

#[test]
fn removed_events_leave_their_seqs_unused() {
    let (_dir, store) = store();
    let t = Token::parse("abc123").unwrap();
    let mut e = Event::new(EventKind::TaskFinished, "s");
    e.token = Some(t);
    store.events().append(e.clone()).unwrap();
    store.events().append(e).unwrap();
    assert_eq!(store.events().remove(&[t], None, true).unwrap(), 2, "a dry run counts");
    assert_eq!(store.events().read(None, 0, 10).unwrap().len(), 2, "and removes nothing");
    assert_eq!(store.events().remove(&[t], None, false).unwrap(), 2);
    let next = store.events().append(Event::new(EventKind::Message, "s")).unwrap();
    assert_eq!(next.seq, Some(3));
}
