//! `roce-xdp`: the command-line front end.
fn main() {
    println!("roce-xdp");
}
